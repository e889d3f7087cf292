//! PyYAML, as heat-agents' hooks and os-apply-config use it: `safe_load` (`load`: docker-cmd
//! configs given as text, `.oac` control files) and `safe_dump(default_flow_style=False)`
//! (`dump`: salt's state files and minion options, docker-compose's map configs).

mod dump;
mod load;

pub(crate) use dump::safe_dump;
pub(crate) use load::safe_load;
