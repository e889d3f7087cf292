//! Templates that make the shim evaluate a lot (the shape of issue 31's review: values that
//! `str_replace` a large parameter many times), and the shim's peak memory, for the tests of the
//! evaluation budget and of a large create (docs/templates.md, "Limits").

/// A HOT template with a string parameter `big`, `values` OS::Heat::Value resources `v0`, ...
/// and `outputs` outputs `o0`, ..., each `str_replace`-ing `big` `copies` times, then `more`
/// (resource lines, two spaces in).
pub fn replaced_values(values: usize, outputs: usize, copies: usize, more: &str) -> String {
    let value =
        format!("{{str_replace: {{template: \"{}\", params: {{\"$p\": {{get_param: big}}}}}}}}", "$p".repeat(copies));
    let mut text = String::from("heat_template_version: 2018-08-31\nparameters:\n  big: {type: string}\nresources:\n");
    for index in 0..values {
        text.push_str(&format!("  v{index}: {{type: OS::Heat::Value, properties: {{value: {value}}}}}\n"));
    }
    text.push_str(more);
    if outputs > 0 {
        text.push_str("outputs:\n");
    }
    for index in 0..outputs {
        text.push_str(&format!("  o{index}: {{value: {value}}}\n"));
    }
    text
}

/// The peak resident set (VmHWM) of process `pid`, in MiB.
pub fn peak_rss_mib(pid: i32) -> u64 {
    crate::process::status_kib(pid, "VmHWM") / 1024
}
