//! The `scheduler-service` binary with `--policy-file`: an invalid file stops it at start with
//! the reason on stderr, and the environment variable works like the flag.

use std::process::Command;

const BAD: &str = "\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: gpu
    plugins:
      multiPoint:
        enabled:
          - name: SchedulingGates
";

fn service() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_scheduler-service"));
    c.args(["--listen", "127.0.0.1:0", "--metrics-listen", "off"]);
    c.env_remove("PLACEMENT_POLICY_FILE");
    c
}

#[test]
fn an_invalid_policy_file_stops_the_service_naming_the_plugin_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policies.yaml");
    std::fs::write(&path, BAD).unwrap();

    let by_flag = service().arg("--policy-file").arg(&path).output().unwrap();
    let by_env = service().env("PLACEMENT_POLICY_FILE", &path).output().unwrap();
    for out in [by_flag, by_env] {
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&path.display().to_string())
                && stderr.contains("profiles[0].plugins.multiPoint.enabled[0]")
                && stderr.contains("plugin \"SchedulingGates\" of profile \"gpu\" is not implemented"),
            "{stderr}"
        );
    }
}

#[test]
fn help_documents_the_policy_flags() {
    let out = service().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--policy-file",
        "PLACEMENT_POLICY_FILE",
        "--policy-reload-seconds",
        "KubeSchedulerConfiguration",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}
