//! `stack failures` (Heat's `openstack stack failures list`: each failed resource with its
//! status reason and, for a deployment, its run's stdout and stderr, the last ten lines of each
//! without `--long`) and `stack resource mark-unhealthy`.

use std::io::Write;

use reqwest::Method;

use super::cli::{MarkUnhealthyArgs, StackFailuresArgs};
use super::http::AdminClient;
use super::render::printable;
use super::{ClientContext, ClientError, ExitStatus, write};
use super::{decode, pretty};
use crate::model::Failure;

/// Lines of a reason or an output shown without `--long`, as heatclient's `indent_and_truncate`.
const TRUNCATE_LINES: usize = 10;

pub(crate) async fn stack_failures(
    args: &StackFailuresArgs,
    context: &ClientContext,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    let value = AdminClient::new(context)?.get(&["v1", "stacks", &args.name, "failures"]).await?;
    let text = match args.json {
        true => pretty(&value),
        false => render(&decode::<Vec<Failure>>(value, "stacks/{name}/failures")?, args.long),
    };
    write(out, &text)?;
    Ok(ExitStatus::Success)
}

pub(crate) async fn mark_unhealthy(
    args: &MarkUnhealthyArgs,
    context: &ClientContext,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    let body = serde_json::json!({"reason": args.reason, "reset": args.reset});
    let path = ["v1", "stacks", &args.name, "resources", &args.resource, "mark-unhealthy"];
    AdminClient::new(context)?.request(Method::POST, &path, Some(&body)).await?;
    let done =
        if args.reset { "is no longer marked unhealthy" } else { "is marked unhealthy: the next update runs it again" };
    write(out, &format!("resource {} of stack {} {done}\n", printable(&args.resource), printable(&args.name)))?;
    Ok(ExitStatus::Success)
}

/// Heat's layout: `<path>:` then indented keys; multi-line values as YAML block scalars.
pub(crate) fn render(failures: &[Failure], long: bool) -> String {
    let mut text = String::new();
    for failure in failures {
        text.push_str(&format!("{}:\n", printable(&failure.path)));
        text.push_str(&format!("  resource_type: {}\n", printable(&failure.resource_type)));
        if let Some(id) = &failure.physical_resource_id {
            text.push_str(&format!("  physical_resource_id: {}\n", printable(id)));
        }
        if let Some(server) = &failure.server {
            text.push_str(&format!("  server: {}\n", printable(server)));
        }
        text.push_str(&format!("  status: {}\n", printable(&failure.status)));
        text.push_str(&block("status_reason", &failure.status_reason, long, None));
        if let Some(stdout) = &failure.deploy_stdout {
            text.push_str(&block("deploy_stdout", stdout, long, Some("(truncated, view all with --long)")));
        }
        if let Some(stderr) = &failure.deploy_stderr {
            text.push_str(&block("deploy_stderr", stderr, long, Some("(truncated, view all with --long)")));
        }
    }
    text
}

/// `  name: |` and the value's lines indented by four, each made printable; without `long`,
/// only the last ten lines, after `...` (and before `postfix`).
fn block(name: &str, value: &str, long: bool, postfix: Option<&str>) -> String {
    let mut lines: Vec<&str> = value.lines().collect();
    let truncated = !long && lines.len() > TRUNCATE_LINES;
    if truncated {
        lines.drain(..lines.len() - TRUNCATE_LINES);
    }
    let mut text = format!("  {name}: |\n");
    if truncated {
        text.push_str("    ...\n");
    }
    for line in lines {
        text.push_str(&format!("    {}\n", printable(line)));
    }
    if let (true, Some(postfix)) = (truncated, postfix) {
        text.push_str(&format!("    {postfix}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn failure(stdout: &str) -> Failure {
        Failure {
            resource: "group/a".into(),
            path: "s.group.a".into(),
            resource_type: "OS::Heat::SoftwareDeployment".into(),
            physical_resource_id: Some("id-1".into()),
            status: "CREATE_FAILED".into(),
            status_reason: "Deployment to server failed: deploy_status_code : exited 1".into(),
            server: Some("vm1".into()),
            deploy_status_code: json!(1),
            deploy_stdout: Some(stdout.into()),
            deploy_stderr: Some("boom\u{1b}[31m".into()),
        }
    }

    #[test]
    fn the_last_ten_lines_unless_long_and_nothing_raw_reaches_the_terminal() {
        let stdout: Vec<String> = (1..=12).map(|line| format!("line {line}")).collect();
        let short = render(&[failure(&stdout.join("\n"))], false);
        assert!(short.starts_with("s.group.a:\n  resource_type: OS::Heat::SoftwareDeployment\n"), "{short}");
        assert!(short.contains("  deploy_stdout: |\n    ...\n    line 3\n"), "{short}");
        assert!(!short.contains("line 2\n"), "{short}");
        assert!(short.contains("    line 12\n    (truncated, view all with --long)\n"), "{short}");
        assert!(short.contains("    boom\\u{1b}[31m\n"), "escapes are shown, not sent: {short}");
        let long = render(&[failure(&stdout.join("\n"))], true);
        assert!(long.contains("    line 1\n") && !long.contains("truncated"), "{long}");
    }
}
