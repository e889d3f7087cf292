//! `impl_tx!`: the one `Tx` impl both backends' transaction handles share. Each backend keeps
//! its statements in modules of the same names and signatures (`servers`, `stacks`, `nodes`,
//! `records`, each function taking the handle first), so the impl is one line per method
//! handing over to the module that owns the table, written once here. The paths resolve where
//! the macro is invoked: in the backend's own `tx` module.

/// `impl Tx for $handle`, each method calling the backend's table module of the same name.
macro_rules! impl_tx {
    ($handle:ty) => {
        impl $crate::store::Tx for $handle {
            fn insert_server(&mut self, row: &$crate::store::ServerRow) -> Result<bool, $crate::store::StoreError> {
                servers::insert(self, row)
            }
            fn server(&mut self, name: &str) -> Result<Option<$crate::store::ServerRow>, $crate::store::StoreError> {
                servers::by_name(self, name)
            }
            fn server_by_token_hash(
                &mut self,
                hash: &str,
            ) -> Result<Option<$crate::store::ServerRow>, $crate::store::StoreError> {
                servers::by_token_hash(self, hash)
            }
            fn servers(&mut self) -> Result<Vec<$crate::store::ServerRow>, $crate::store::StoreError> {
                servers::all(self)
            }
            fn document_versions(&mut self) -> Result<Vec<(String, u64)>, $crate::store::StoreError> {
                servers::document_versions(self)
            }
            fn set_server_document(
                &mut self,
                name: &str,
                version: u64,
                body: &str,
                published_at: u64,
            ) -> Result<(), $crate::store::StoreError> {
                servers::set_document(self, name, version, body, published_at)
            }
            fn touch_server(&mut self, name: &str, at: u64) -> Result<(), $crate::store::StoreError> {
                servers::touch(self, name, at)
            }
            fn rotate_server_token(
                &mut self,
                name: &str,
                new_hash: &str,
                previous_expires_at: u64,
            ) -> Result<bool, $crate::store::StoreError> {
                servers::rotate_token(self, name, new_hash, previous_expires_at)
            }
            fn server_by_previous_token_hash(
                &mut self,
                hash: &str,
            ) -> Result<Option<(String, u64)>, $crate::store::StoreError> {
                servers::by_previous_token_hash(self, hash)
            }
            fn delete_server(&mut self, name: &str) -> Result<bool, $crate::store::StoreError> {
                servers::delete(self, name)
            }
            fn stacks_using_server(&mut self, server: &str) -> Result<Vec<String>, $crate::store::StoreError> {
                servers::stacks_using(self, server)
            }
            fn put_entry_text(
                &mut self,
                server: &str,
                entry: &$crate::store::EntryText,
            ) -> Result<(), $crate::store::StoreError> {
                servers::put_entry(self, server, entry)
            }
            fn remove_entry(&mut self, server: &str, stack: &str, node: &str) -> Result<(), $crate::store::StoreError> {
                servers::remove_entry(self, server, stack, node)
            }
            fn entry_bytes(
                &mut self,
                server: &str,
                stack: &str,
                node: &str,
            ) -> Result<Option<u64>, $crate::store::StoreError> {
                servers::entry_bytes(self, server, stack, node)
            }
            fn stack_entry_bytes(&mut self, stack: &str) -> Result<u64, $crate::store::StoreError> {
                servers::stack_entry_bytes(self, stack)
            }
            fn entries(&mut self, server: &str) -> Result<Vec<$crate::store::EntryRow>, $crate::store::StoreError> {
                servers::entries(self, server)
            }
            fn entry_texts(
                &mut self,
                server: &str,
            ) -> Result<Vec<$crate::store::EntryText>, $crate::store::StoreError> {
                servers::entry_texts(self, server)
            }
            fn insert_stack(
                &mut self,
                row: &$crate::store::StackRow,
                template: &str,
            ) -> Result<bool, $crate::store::StoreError> {
                stacks::insert(self, row, template)
            }
            fn stack(&mut self, name: &str) -> Result<Option<$crate::store::StackRow>, $crate::store::StoreError> {
                stacks::by_name(self, name)
            }
            fn stack_template(&mut self, name: &str) -> Result<Option<String>, $crate::store::StoreError> {
                stacks::template(self, name)
            }
            fn set_stack_template(&mut self, name: &str, template: &str) -> Result<(), $crate::store::StoreError> {
                stacks::set_template(self, name, template)
            }
            fn stack_requests(
                &mut self,
                name: &str,
            ) -> Result<$crate::store::StoredRequests, $crate::store::StoreError> {
                stacks::requests(self, name)
            }
            fn set_stack_requests(
                &mut self,
                name: &str,
                requests: &$crate::store::StoredRequests,
            ) -> Result<(), $crate::store::StoreError> {
                stacks::set_requests(self, name, requests)
            }
            fn stacks(&mut self) -> Result<Vec<$crate::store::StackRow>, $crate::store::StoreError> {
                stacks::all(self)
            }
            fn update_stack(&mut self, row: &$crate::store::StackRow) -> Result<(), $crate::store::StoreError> {
                stacks::update(self, row)
            }
            fn add_pending(&mut self, stack: &str, delta: i64) -> Result<i64, $crate::store::StoreError> {
                stacks::add_pending(self, stack, delta)
            }
            fn delete_stack(&mut self, name: &str) -> Result<(), $crate::store::StoreError> {
                stacks::delete(self, name)
            }
            fn insert_node(&mut self, row: &$crate::store::NodeRow) -> Result<(), $crate::store::StoreError> {
                nodes::insert(self, row)
            }
            fn node(
                &mut self,
                stack: &str,
                name: &str,
            ) -> Result<Option<$crate::store::NodeRow>, $crate::store::StoreError> {
                nodes::by_name(self, stack, name)
            }
            fn nodes(&mut self, stack: &str) -> Result<Vec<$crate::store::NodeRow>, $crate::store::StoreError> {
                nodes::all(self, stack)
            }
            fn update_node(&mut self, row: &$crate::store::NodeRow) -> Result<(), $crate::store::StoreError> {
                nodes::update(self, row)
            }
            fn update_node_if(
                &mut self,
                row: &$crate::store::NodeRow,
                generation: u64,
                state: $crate::store::NodeState,
            ) -> Result<bool, $crate::store::StoreError> {
                nodes::update_if(self, row, generation, state)
            }
            fn node_by_signal_hash(
                &mut self,
                hash: &str,
            ) -> Result<Option<$crate::store::NodeRow>, $crate::store::StoreError> {
                nodes::by_signal_hash(self, hash)
            }
            fn retire_signal_hash(
                &mut self,
                hash: &str,
                stack: &str,
                node: &str,
            ) -> Result<(), $crate::store::StoreError> {
                records::retire_signal_hash(self, hash, stack, node)
            }
            fn is_retired_signal_hash(&mut self, hash: &str) -> Result<bool, $crate::store::StoreError> {
                records::is_retired_signal_hash(self, hash)
            }
            fn decrement_remaining(&mut self, stack: &str, name: &str) -> Result<i64, $crate::store::StoreError> {
                nodes::decrement_remaining(self, stack, name)
            }
            fn delete_node(&mut self, stack: &str, name: &str) -> Result<(), $crate::store::StoreError> {
                nodes::delete(self, stack, name)
            }
            fn insert_edge(&mut self, stack: &str, from: &str, to: &str) -> Result<(), $crate::store::StoreError> {
                nodes::insert_edge(self, stack, from, to)
            }
            fn successors(&mut self, stack: &str, from: &str) -> Result<Vec<String>, $crate::store::StoreError> {
                nodes::successors(self, stack, from)
            }
            fn delete_edges(&mut self, stack: &str) -> Result<(), $crate::store::StoreError> {
                nodes::delete_edges(self, stack)
            }
            fn upsert_wait_signal(
                &mut self,
                row: &$crate::store::WaitSignalRow,
            ) -> Result<bool, $crate::store::StoreError> {
                records::upsert_wait_signal(self, row)
            }
            fn wait_signals(
                &mut self,
                stack: &str,
                handle: &str,
            ) -> Result<Vec<$crate::store::WaitSignalRow>, $crate::store::StoreError> {
                records::wait_signals(self, stack, handle)
            }
            fn wait_signal_success(
                &mut self,
                stack: &str,
                handle: &str,
                signal_id: &str,
            ) -> Result<Option<bool>, $crate::store::StoreError> {
                records::wait_signal_success(self, stack, handle, signal_id)
            }
            fn append_event(
                &mut self,
                stack: &str,
                time: u64,
                resource: &str,
                status: &str,
                reason: &str,
            ) -> Result<u64, $crate::store::StoreError> {
                records::append_event(self, stack, time, resource, status, reason)
            }
            fn events(&mut self, stack: &str) -> Result<Vec<$crate::store::EventRow>, $crate::store::StoreError> {
                records::events(self, stack)
            }
            fn prune_history(
                &mut self,
                retention: &$crate::store::HistoryRetention,
                now: u64,
            ) -> Result<$crate::store::HistoryPruned, $crate::store::StoreError> {
                records::prune_history(self, retention, now)
            }
            fn put_deadline(&mut self, row: &$crate::store::DeadlineRow) -> Result<(), $crate::store::StoreError> {
                records::put_deadline(self, row)
            }
            fn delete_deadline(
                &mut self,
                stack: &str,
                node: Option<&str>,
                generation: u64,
            ) -> Result<(), $crate::store::StoreError> {
                records::delete_deadline(self, stack, node, generation)
            }
            fn due_deadlines(
                &mut self,
                now: u64,
                limit: usize,
            ) -> Result<Vec<$crate::store::DeadlineRow>, $crate::store::StoreError> {
                records::due_deadlines(self, now, limit)
            }
            fn insert_ui_session(
                &mut self,
                row: &$crate::store::UiSessionRow,
            ) -> Result<bool, $crate::store::StoreError> {
                sessions::insert(self, row)
            }
            fn ui_session(
                &mut self,
                key: &str,
            ) -> Result<Option<$crate::store::UiSessionRow>, $crate::store::StoreError> {
                sessions::by_key(self, key)
            }
            fn delete_ui_session(&mut self, key: &str) -> Result<bool, $crate::store::StoreError> {
                sessions::delete(self, key)
            }
            fn prune_ui_sessions(&mut self, now: u64) -> Result<usize, $crate::store::StoreError> {
                sessions::prune(self, now)
            }
        }
    };
}

pub(crate) use impl_tx;
