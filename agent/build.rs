//! Build script: records the git commit for `--version` (see build-support/commit.rs).

include!("../build-support/commit.rs");

fn main() {
    emit_commit();
}
