//! Tests of policy files: placement's format and real `KubeSchedulerConfiguration` documents,
//! checked against kube-scheduler v1's documented defaults (default plugins and weights:
//! TaintToleration 3, NodeAffinity 2, PodTopologySpread 2, InterPodAffinity 2, NodeResourcesFit 1,
//! NodeResourcesBalancedAllocation 1, ImageLocality 1; NodeResourcesFitArgs LeastAllocated on
//! cpu and memory, weight 1).

use std::collections::BTreeMap;

use super::*;

fn parse(text: &str) -> PolicyFile {
    match parse_policy_file(text) {
        Ok(f) => f,
        Err(e) => panic!("{e}"),
    }
}

fn error(text: &str) -> PolicyConfigError {
    match parse_policy_file(text) {
        Ok(f) => panic!("expected an error, parsed {f:?}"),
        Err(e) => e,
    }
}

fn scores(p: &Policy) -> BTreeMap<&'static str, i64> {
    p.scores.iter().map(|s| (s.plugin.name(), s.weight)).collect()
}

fn filters(p: &Policy) -> Vec<&'static str> {
    p.filters.iter().map(|f| f.name()).collect()
}

fn resources(r: &[ResourceWeight]) -> Vec<(String, i64)> {
    r.iter().map(|r| (r.name.to_string(), r.weight)).collect()
}

const KSC: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

#[test]
fn a_configuration_without_profiles_is_kube_schedulers_default_profile() {
    let file = parse(KSC);
    assert_eq!(file.format, FileFormat::KubeSchedulerConfiguration);
    assert_eq!(file.policies.len(), 1);
    let p = &file.policies[0];
    let default = Policy::kube_default();
    assert_eq!(p.name, "default-scheduler");
    assert_eq!(filters(p), filters(&default));
    assert_eq!(scores(p), scores(&default));
    assert_eq!(p.scoring_strategy, ScoringStrategy::LeastAllocated);
    assert_eq!(resources(&p.fit_resources), [("cpu".into(), 1), ("memory".into(), 1)]);
    assert_eq!(
        resources(&p.balanced_resources),
        [("cpu".into(), 1), ("memory".into(), 1)]
    );
    assert!(file.ignored.is_empty(), "{:?}", file.ignored);
    // kube-scheduler's documented default weights for the plugins placement implements.
    for (plugin, weight) in [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
    ] {
        assert_eq!(scores(p)[plugin], weight, "{plugin}");
    }
    // Filters run in kube-scheduler 1.37's multiPoint order (NodeName before NodeUnschedulable).
    assert_eq!(
        filters(p)[..6],
        [
            "NodeName",
            "NodeUnschedulable",
            "TaintToleration",
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit"
        ]
    );
}

/// A configuration as an operator would run it: several profiles, pluginConfig with typed args,
/// disabled plugins at one point, a `"*"` disable, multiPoint overrides, process settings.
const OPERATOR_CONFIG: &str = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  resourceNamespace: kube-system
  resourceName: kube-scheduler
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
  qps: 100
percentageOfNodesToScore: 50
profiles:
  - schedulerName: default-scheduler
    plugins:
      queueSort:
        enabled:
          - name: PrioritySort
  - schedulerName: bin-packing-scheduler
    plugins:
      score:
        disabled:
          - name: ImageLocality
        enabled:
          - name: NodeResourcesFit
            weight: 5
    pluginConfig:
      - name: NodeResourcesFit
        args:
          apiVersion: kubescheduler.config.k8s.io/v1
          kind: NodeResourcesFitArgs
          scoringStrategy:
            type: MostAllocated
            resources:
              - name: cpu
                weight: 2
              - name: memory
                weight: 1
              - name: nvidia.com/gpu
                weight: 3
      - name: DefaultPreemption
        args:
          minCandidateNodesPercentage: 20
  - schedulerName: gpu-scheduler
    percentageOfNodesToScore: 100
    plugins:
      multiPoint:
        enabled:
          - name: NodeResourcesBalancedAllocation
            weight: 4
      filter:
        disabled:
          - name: NodePorts
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: RequestedToCapacityRatio
            resources:
              - name: nvidia.com/gpu
            requestedToCapacityRatio:
              shape:
                - utilization: 0
                  score: 0
                - utilization: 80
                  score: 10
                - utilization: 100
                  score: 2
      - name: NodeResourcesBalancedAllocation
        args:
          resources:
            - name: cpu
              weight: 1
            - name: memory
            - name: nvidia.com/gpu
  - schedulerName: minimal-scheduler
    plugins:
      multiPoint:
        disabled:
          - name: "*"
        enabled:
          - name: NodeName
          - name: NodeResourcesFit
            weight: 2
  - schedulerName: image-scheduler
    plugins:
      score:
        disabled:
          - name: "*"
        enabled:
          - name: ImageLocality
            weight: 7
          - name: TaintToleration
"#;

#[test]
fn an_operators_configuration_maps_profile_by_profile() {
    let file = parse(OPERATOR_CONFIG);
    let names: Vec<&str> = file.policies.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "default-scheduler",
            "bin-packing-scheduler",
            "gpu-scheduler",
            "minimal-scheduler",
            "image-scheduler"
        ]
    );
    let default = Policy::kube_default();
    let [plain, packing, gpu, minimal, images] = &file.policies[..] else {
        panic!("five policies")
    };

    // An explicit PrioritySort changes nothing: the profile is the default one.
    assert_eq!(filters(plain), filters(&default));
    assert_eq!(scores(plain), scores(&default));

    // score.disabled drops ImageLocality; score.enabled overrides NodeResourcesFit's weight and,
    // being an override, moves it first (kube-scheduler's expandMultiPointPlugins order).
    assert_eq!(filters(packing), filters(&default));
    let mut want = scores(&default);
    want.remove("ImageLocality");
    want.insert("NodeResourcesFit", 5);
    assert_eq!(scores(packing), want);
    assert_eq!(packing.scores[0].plugin, ScorePlugin::NodeResourcesFit);
    assert_eq!(packing.scoring_strategy, ScoringStrategy::MostAllocated);
    assert_eq!(
        resources(&packing.fit_resources),
        [("cpu".into(), 2), ("memory".into(), 1), ("nvidia.com/gpu".into(), 3)]
    );

    // multiPoint re-lists a default with a new weight (in place); filter.disabled drops NodePorts
    // from the filters only.
    let mut want = filters(&default);
    want.retain(|f| *f != "NodePorts");
    assert_eq!(filters(gpu), want);
    let mut want = scores(&default);
    want.insert("NodeResourcesBalancedAllocation", 4);
    assert_eq!(scores(gpu), want);
    assert_eq!(
        gpu.scoring_strategy,
        ScoringStrategy::RequestedToCapacityRatio {
            shape: vec![
                ShapePoint {
                    utilization: 0,
                    score: 0
                },
                ShapePoint {
                    utilization: 80,
                    score: 10
                },
                ShapePoint {
                    utilization: 100,
                    score: 2
                },
            ]
        }
    );
    assert_eq!(resources(&gpu.fit_resources), [("nvidia.com/gpu".into(), 1)]);
    assert_eq!(
        resources(&gpu.balanced_resources),
        [("cpu".into(), 1), ("memory".into(), 1), ("nvidia.com/gpu".into(), 1)]
    );

    // "*" in multiPoint.disabled: only what the profile lists runs, in its order.
    assert_eq!(filters(minimal), ["NodeName", "NodeResourcesFit"]);
    assert_eq!(scores(minimal), BTreeMap::from([("NodeResourcesFit", 2)]));

    // "*" in score.disabled: the filters stay the defaults, the scores are only the listed ones;
    // an unset weight is 1, not the default profile's 3.
    assert_eq!(filters(images), filters(&default));
    assert_eq!(
        scores(images),
        BTreeMap::from([("ImageLocality", 7), ("TaintToleration", 1)])
    );

    // Settings without effect are accepted and reported.
    let ignored = file.ignored.join("\n");
    for field in [
        "leaderElection",
        "clientConnection",
        "percentageOfNodesToScore",
        "profiles[2].percentageOfNodesToScore",
        "profiles[0].plugins.queueSort.enabled[0] (PrioritySort)",
        "profiles[1].pluginConfig[1] (DefaultPreemption)",
    ] {
        assert!(ignored.contains(&format!("{field}: ")), "{field} not in {ignored}");
    }

    // Every policy validates and each configuration has its own digest.
    let digests: std::collections::HashSet<String> = file.policies.iter().map(Policy::digest).collect();
    assert_eq!(digests.len(), file.policies.len());
}

#[test]
fn implied_defaults_placement_lacks_are_skipped_but_explicit_ones_are_errors() {
    // SchedulingGates is in kube-scheduler's defaults: implied, it is skipped (first test);
    // enabling it is an error naming the plugin, the profile and the field.
    // DynamicResources is implemented: disabling it takes it out.
    let disabled = format!("{KSC}profiles:\n- schedulerName: a\n  plugins:\n    multiPoint:\n      disabled:\n      - name: DynamicResources\n");
    let mut without = filters(&Policy::kube_default());
    without.retain(|f| *f != "DynamicResources");
    assert_eq!(filters(&parse(&disabled).policies[0]), without);
    // VolumeBinding is implemented: disabling it takes it out.
    let disabled = format!("{KSC}profiles:\n- schedulerName: a\n  plugins:\n    multiPoint:\n      disabled:\n      - name: VolumeBinding\n");
    let mut without = filters(&Policy::kube_default());
    without.retain(|f| *f != "VolumeBinding");
    assert_eq!(filters(&parse(&disabled).policies[0]), without);

    for (point, plugin) in [
        ("score", "MyCustomScore"),
        ("preFilter", "SomeOutOfTreePlugin"),
        ("postFilter", "SomeOutOfTreePostFilter"),
        ("multiPoint", "SchedulingGates"),
    ] {
        // NodeName first where it is valid, so the error's index is that of the culprit.
        let (first, index) = match point {
            "postFilter" => ("", 0),
            _ => ("      - name: NodeName\n", 1),
        };
        let text = format!(
            "{KSC}profiles:\n- schedulerName: a\n- schedulerName: gpu\n  plugins:\n    {point}:\n      enabled:\n{first}      - name: {plugin}\n"
        );
        let e = error(&text);
        assert_eq!(
            e,
            PolicyConfigError::NotImplemented {
                profile: "gpu".into(),
                plugin: plugin.into(),
                field: format!("profiles[1].plugins.{point}.enabled[{index}]"),
            },
            "{point}: {plugin}"
        );
        assert!(
            e.to_string()
                .contains(&format!("plugin {plugin:?} of profile \"gpu\" is not implemented")),
            "{e}"
        );
    }
}

fn invalid_field(e: &PolicyConfigError) -> &str {
    match e {
        PolicyConfigError::Invalid { field, .. } => field,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn invalid_kube_scheduler_configurations_name_the_field() {
    let fit = |args: &str| {
        format!("{KSC}profiles:\n- schedulerName: a\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n{args}")
    };
    let cases: Vec<(String, &str, &str)> = vec![
        (
            fit("      scoringStrategy:\n        type: Spread\n"),
            "profiles[0].pluginConfig[0].args.scoringStrategy.type",
            "unsupported value \"Spread\"",
        ),
        (
            fit("      scoringStrategy:\n        type: RequestedToCapacityRatio\n"),
            "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio",
            "must be specified",
        ),
        (
            fit("      scoringStrategy:\n        type: MostAllocated\n        requestedToCapacityRatio:\n          shape: []\n"),
            "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio",
            "must be nil",
        ),
        (
            fit("      scoringStrategy:\n        type: RequestedToCapacityRatio\n        requestedToCapacityRatio:\n          shape:\n          - utilization: 50\n            score: 1\n          - utilization: 40\n            score: 2\n"),
            "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
            "increasing order",
        ),
        (
            fit("      scoringStrategy:\n        type: RequestedToCapacityRatio\n        requestedToCapacityRatio:\n          shape:\n          - utilization: 50\n            score: 11\n"),
            "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[0].score",
            "not in valid range [0, 10]",
        ),
        (
            fit("      scoringStrategy:\n        type: LeastAllocated\n        resources:\n        - name: cpu\n          weight: 101\n"),
            "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight",
            "not in valid range (0, 100]",
        ),
        (
            fit("      scoringStrategy:\n        type: LeastAllocated\n        resources:\n        - name: not a resource\n"),
            "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].name",
            "invalid resource name",
        ),
        (
            fit("      ignoredResources: [example.com/foo]\n"),
            "profiles[0].pluginConfig[0].args.ignoredResources",
            "not supported",
        ),
        (
            fit("      kind: NodeResourcesBalancedAllocationArgs\n"),
            "profiles[0].pluginConfig[0].args.kind",
            "has to match plugin args",
        ),
        (
            fit("      scoringStrategy:\n        typ: MostAllocated\n"),
            "profiles[0].pluginConfig[0].args",
            "unknown field `typ`",
        ),
        (
            format!("{KSC}profiles:\n- schedulerName: a\n  pluginConfig:\n  - name: NodeResourcesBalancedAllocation\n    args:\n      resources:\n      - name: cpu\n        weight: 2\n"),
            "profiles[0].pluginConfig[0].args.resources[0].weight",
            "must be 1",
        ),
        (
            format!("{KSC}profiles:\n- schedulerName: a\n  pluginConfig:\n  - name: NodeAffinity\n    args:\n      addedAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution: {{}}\n"),
            "profiles[0].pluginConfig[0].args.addedAffinity",
            "not supported",
        ),
        (
            format!("{KSC}profiles:\n- schedulerName: a\n  pluginConfig:\n  - name: NodeResourcesFit\n  - name: NodeResourcesFit\n"),
            "profiles[0].pluginConfig[1].name",
            "duplicate value",
        ),
        (
            format!("{KSC}profiles:\n- schedulerName: a\n- plugins: {{}}\n"),
            "profiles[1].schedulerName",
            "required",
        ),
        (
            format!("{KSC}profiles:\n- schedulerName: a\n- schedulerName: a\n"),
            "profiles[1].schedulerName",
            "duplicate value \"a\"",
        ),
        (
            format!("{KSC}profiles:\n- schedulerName: a\n  plugins:\n    score:\n      enabled:\n      - name: NodePorts\n"),
            "profiles[0].plugins.score.enabled[0].name",
            "does not extend score",
        ),
        (
            format!("{KSC}profiles:\n- schedulerName: a\n  plugins:\n    filter:\n      enabled:\n      - name: ImageLocality\n"),
            "profiles[0].plugins.filter.enabled[0].name",
            "does not extend filter",
        ),
        (
            format!("{KSC}profiles:\n- schedulerName: a\n  plugins:\n    score:\n      enabled:\n      - name: ImageLocality\n        weight: -1\n"),
            "profiles[0].plugins.score.enabled[0].weight",
            "must not be negative",
        ),
        (
            format!("{KSC}profiles:\n- schedulerName: a\n  plugins:\n    multiPoint:\n      enabled:\n      - name: NodeName\n      - name: NodeName\n"),
            "profiles[0].plugins.multiPoint.enabled[1].name",
            "listed twice",
        ),
        (
            format!("{KSC}percentageOfNodesToScore: 101\n"),
            "percentageOfNodesToScore",
            "not in valid range [0, 100]",
        ),
        (
            format!("{KSC}extenders:\n- urlPrefix: http://extender\n  prioritizeVerb: prioritize\n"),
            "extenders[0].weight",
            "must have a positive weight applied to it",
        ),
        (
            format!("{KSC}extenders:\n- urlPrefix: http://a\n  bindVerb: bind\n- urlPrefix: http://b\n  bindVerb: bind\n"),
            "extenders",
            "only one extender can implement bind",
        ),
        (
            format!("{KSC}extenders:\n- urlPrefix: http://a\n  managedResources:\n  - name: cpu\n"),
            "extenders[0].managedResources[0].name",
            "a domain prefix is required",
        ),
        (
            format!("{KSC}extenders:\n- urlPrefix: http://a\n  managedResources:\n  - name: example.com/x\n- urlPrefix: http://b\n  managedResources:\n  - name: example.com/x\n"),
            "extenders[1].managedResources[0].name",
            "duplicate extender managed resource name",
        ),
        (
            format!("{KSC}extenders:\n- urlPrefix: http://a\n  httpTimeout: 30\n"),
            "extenders[0].httpTimeout",
            "missing unit",
        ),
        (
            format!("{KSC}extenders:\n- urlPrefix: http://a\n  preemptVerb: preempt\n"),
            "extenders[0].preemptVerb",
            "not supported",
        ),
        (
            format!("{KSC}extenders:\n- filterVerb: filter\n"),
            "extenders[0].urlPrefix",
            "required",
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n".to_string(),
            "apiVersion",
            "convert the configuration to kubescheduler.config.k8s.io/v1",
        ),
    ];
    for (text, field, message) in cases {
        let e = error(&text);
        assert_eq!(invalid_field(&e), field, "{e}\n{text}");
        assert!(e.to_string().contains(message), "{e:?} lacks {message:?}\n{text}");
        assert!(e.to_string().starts_with(&format!("{field}: ")), "{e}");
    }
}

#[test]
fn yaml_errors_carry_the_line_and_the_unknown_field() {
    let e = error(&format!(
        "{KSC}profiles:\n- schedulerName: a\n  plugin:\n    score: {{}}\n"
    ));
    let PolicyConfigError::Yaml(message) = &e else {
        panic!("{e:?}")
    };
    assert!(message.contains("line 5"), "{message}");
    assert!(message.contains("unknown field `plugin`"), "{message}");
    assert!(!message.contains('\n'), "one line: {message}");

    let e = error("apiVersion: v1\nkind: ConfigMap\n");
    assert!(matches!(e, PolicyConfigError::UnknownDocument { .. }), "{e:?}");
    assert!(e.to_string().contains("not a policy file"), "{e}");
    assert!(matches!(error(""), PolicyConfigError::Invalid { .. }));
    assert!(matches!(error("profiles: [unclosed"), PolicyConfigError::Yaml(_)));
}

const PLACEMENT_FILE: &str = r#"
apiVersion: placement/v1
kind: PolicyConfiguration
policies:
  - name: spread
    description: kube-scheduler's defaults, with a seed
    seed: 42
  - name: gpu-packing
    description: pack GPU nodes
    filters: [NodeUnschedulable, NodeName, TaintToleration, NodeResourcesFit]
    scores:
      - name: NodeResourcesFit
        weight: 10
      - name: TaintToleration
    scoringStrategy:
      type: MostAllocated
      resources:
        - name: nvidia.com/gpu
          weight: 5
        - name: cpu
    balancedResources:
      - name: cpu
      - name: nvidia.com/gpu
"#;

#[test]
fn placement_files_set_filters_scores_strategy_resources_and_seed() {
    let file = parse(PLACEMENT_FILE);
    assert_eq!(file.format, FileFormat::Placement);
    let [spread, gpu] = &file.policies[..] else {
        panic!("two policies")
    };
    let default = Policy::kube_default();
    assert_eq!(spread.name, "spread");
    assert_eq!(spread.description, "kube-scheduler's defaults, with a seed");
    assert_eq!(spread.seed, 42);
    assert_eq!(filters(spread), filters(&default));
    assert_eq!(scores(spread), scores(&default));
    assert_eq!(spread.scoring_strategy, ScoringStrategy::LeastAllocated);

    assert_eq!(
        filters(gpu),
        ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeResourcesFit"]
    );
    // An unset weight is the default profile's weight of the plugin.
    assert_eq!(
        scores(gpu),
        BTreeMap::from([("NodeResourcesFit", 10), ("TaintToleration", 3)])
    );
    assert_eq!(gpu.scoring_strategy, ScoringStrategy::MostAllocated);
    assert_eq!(
        resources(&gpu.fit_resources),
        [("nvidia.com/gpu".into(), 5), ("cpu".into(), 1)]
    );
    assert_eq!(
        resources(&gpu.balanced_resources),
        [("cpu".into(), 1), ("nvidia.com/gpu".into(), 1)]
    );
    assert_eq!(gpu.seed, 0);
}

#[test]
fn invalid_placement_files_name_the_field() {
    let file = |policy: &str| format!("apiVersion: placement/v1\nkind: PolicyConfiguration\npolicies:\n{policy}");
    let cases = [
        (file("- description: x\n"), "policies[0].name", "required"),
        (file("- name: a\n- name: a\n"), "policies[1].name", "duplicate value"),
        (file("- name: a\n  filters: [NodeNames]\n"), "policies[0].filters[0]", "unknown filter plugin \"NodeNames\""),
        (file("- name: a\n  scores:\n  - name: Bogus\n"), "policies[0].scores[0].name", "unknown score plugin"),
        (
            file("- name: a\n  scoringStrategy:\n    type: MostAllocated\n    resources:\n    - name: cpu\n      weight: 0\n    - name: memory\n      weight: -3\n"),
            "policies[0].scoringStrategy.resources[1].weight",
            "not in valid range",
        ),
        (file("- name: a\n  balancedResources:\n  - name: cpu\n  - name: cpu\n"), "policies[0].balancedResources[1].name", "duplicate"),
        ("apiVersion: placement/v1\nkind: PolicyConfiguration\n".to_string(), "policies", "at least one"),
    ];
    for (text, field, message) in cases {
        let e = error(&text);
        assert_eq!(invalid_field(&e), field, "{e}");
        assert!(e.to_string().contains(message), "{e}");
    }
    // A kube-scheduler plugin placement does not implement, named as such.
    assert!(matches!(
        error(&file("- name: a\n  filters: [SchedulingGates]\n")),
        PolicyConfigError::NotImplemented { plugin, field, .. } if plugin == "SchedulingGates" && field == "policies[0].filters[0]"
    ));
    // The engine's own validation still runs: a zero score weight.
    assert!(matches!(
        error(&file("- name: a\n  scores:\n  - name: ImageLocality\n    weight: 0\n")),
        PolicyConfigError::Policy { field, source: PolicyError::BadWeight { .. } } if field == "policies[0]"
    ));
    // Unknown fields are refused with their line.
    let e = error(&file("- name: a\n  weights: {}\n"));
    assert!(
        e.to_string().contains("unknown field `weights`") && e.to_string().contains("line 5"),
        "{e}"
    );
}

#[test]
fn plugin_names_resolve_through_the_tables() {
    for f in FilterPlugin::ALL {
        assert_eq!(FilterPlugin::from_name(f.name()), Some(*f));
    }
    for s in ScorePlugin::ALL {
        assert_eq!(ScorePlugin::from_name(s.name()), Some(*s));
    }
    assert_eq!(FilterPlugin::from_name("ImageLocality"), None);
    assert_eq!(ScorePlugin::from_name("NodePorts"), None);
    // Every plugin placement implements is one of kube-scheduler's defaults, but its own
    // DevicePacking.
    for name in FilterPlugin::ALL
        .iter()
        .map(|f| f.name())
        .chain(ScorePlugin::ALL.iter().map(|s| s.name()))
    {
        assert_eq!(kube_knows(name), name != "DevicePacking", "{name}");
    }
}

#[test]
fn inter_pod_affinity_and_spread_are_default_plugins_with_their_args() {
    let p = &parse(KSC).policies[0];
    assert_eq!(scores(p)["PodTopologySpread"], 2);
    assert_eq!(scores(p)["InterPodAffinity"], 2);
    assert_eq!(
        filters(p)[6..],
        [
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity",
            "DynamicResources",
            "NodeDeclaredFeatures"
        ]
    );
    assert_eq!(scores(p)["DynamicResources"], 2);
    assert_eq!(p.inter_pod_affinity, InterPodAffinityArgs::default());
    assert_eq!(p.pod_topology_spread, PodTopologySpreadArgs::default());

    let text = format!(
        "{KSC}profiles:\n- schedulerName: a\n  pluginConfig:\n  - name: InterPodAffinity\n    args:\n      hardPodAffinityWeight: 7\n      ignorePreferredTermsOfExistingPods: true\n  - name: PodTopologySpread\n    args:\n      defaultConstraints:\n      - maxSkew: 2\n        topologyKey: topology.kubernetes.io/zone\n        whenUnsatisfiable: DoNotSchedule\n"
    );
    let p = &parse(&text).policies[0];
    assert_eq!(p.inter_pod_affinity.hard_pod_affinity_weight, 7);
    assert!(p.inter_pod_affinity.ignore_preferred_terms_of_existing_pods);
    // kube-scheduler defaults defaultingType to List when defaultConstraints is given.
    assert_eq!(
        p.pod_topology_spread.defaulting_type,
        crate::engine::policy::DefaultingType::List
    );
    assert_eq!(p.pod_topology_spread.effective_defaults()[0].max_skew, 2);

    for (args, field) in [
        (
            "  - name: InterPodAffinity\n    args:\n      hardPodAffinityWeight: 101\n",
            "profiles[0]",
        ),
        (
            "  - name: InterPodAffinity\n    args:\n      hardPodAffinityWeigh: 1\n",
            "profiles[0].pluginConfig[0].args",
        ),
        (
            "  - name: PodTopologySpread\n    args:\n      defaultingType: System\n      defaultConstraints:\n      - maxSkew: 1\n        topologyKey: zone\n        whenUnsatisfiable: DoNotSchedule\n",
            "profiles[0]",
        ),
        (
            "  - name: PodTopologySpread\n    args:\n      defaultConstraints:\n      - maxSkew: 0\n        topologyKey: zone\n        whenUnsatisfiable: DoNotSchedule\n",
            "profiles[0]",
        ),
    ] {
        let text = format!("{KSC}profiles:\n- schedulerName: a\n  pluginConfig:\n{args}");
        let e = error(&text);
        let got = match &e {
            PolicyConfigError::Invalid { field, .. } | PolicyConfigError::Policy { field, .. } => field.as_str(),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(got, field, "{e}");
    }
}

#[test]
fn placement_files_take_inter_pod_affinity_and_spread_args() {
    let text = "apiVersion: placement/v1\nkind: PolicyConfiguration\npolicies:\n- name: strict\n  interPodAffinity:\n    hardPodAffinityWeight: 0\n  podTopologySpread:\n    defaultingType: List\n";
    let p = &parse(text).policies[0];
    assert_eq!(p.inter_pod_affinity.hard_pod_affinity_weight, 0);
    assert!(
        p.pod_topology_spread.effective_defaults().is_empty(),
        "List without constraints: none"
    );
}

const RULES_FILE: &str = r#"
apiVersion: placement/v1
kind: PolicyConfiguration
policies:
  - name: nginx-on-test-nodes
    rules:
      filters:
        - name: nginx-needs-test-label
          expression: "!pod.metadata.name.contains('nginx') || ('test' in node.metadata.labels && node.metadata.labels['test'] == 'test')"
          reason: no match label
      scores:
        - name: short-names
          expression: "20 - size(node.metadata.name)"
          weight: 3
"#;

#[test]
fn rules_are_read_with_their_reason_and_weight() {
    let file = parse(RULES_FILE);
    let rules = &file.policies[0].rules;
    assert_eq!(rules.filters[0].name, "nginx-needs-test-label");
    assert_eq!(rules.filters[0].reason, "no match label");
    assert_eq!(rules.scores[0].weight, 3);
    assert!(
        Policy::kube_default().rules.is_empty(),
        "the built-in policies have no rules"
    );
}

#[test]
fn a_bad_rule_expression_names_its_field_line_and_column() {
    let text = RULES_FILE.replace("20 - size(node.metadata.name)", "20 - size(node.metadata.name");
    let e = error(&text);
    let PolicyConfigError::Invalid { field, message } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(field, "policies[0].rules.scores[0].expression");
    assert!(message.starts_with("line 1 column "), "{message}");
    let text = RULES_FILE.replace("weight: 3", "weight: 0");
    assert!(error(&text)
        .to_string()
        .starts_with("policies[0].rules.scores[0].weight: "));
    let text = RULES_FILE.replace("reason:", "because:");
    assert!(
        error(&text).to_string().contains("because"),
        "unknown fields are errors"
    );
}

#[test]
fn extenders_load_from_both_formats_with_kube_defaults() {
    let ksc = format!(
        "{KSC}profiles:\n- schedulerName: a\n- schedulerName: b\nextenders:\n- urlPrefix: http://ignorable\n  filterVerb: filter\n  ignorable: true\n- urlPrefix: http://127.0.0.1:8888/\n  filterVerb: filter\n  prioritizeVerb: prioritize\n  weight: 2\n  nodeCacheCapable: true\n  httpTimeout: 1m30s\n  managedResources:\n  - name: example.com/gpu\n"
    );
    let file = parse_policy_file(&ksc).expect("loads");
    assert_eq!(file.policies.len(), 2);
    for p in &file.policies {
        assert_eq!(p.extenders.len(), 2, "every profile calls the file's extenders");
        // Ignorable extenders go last, as kube-scheduler orders them.
        assert_eq!(p.extenders[0].url_prefix, "http://127.0.0.1:8888/");
        assert_eq!(p.extenders[0].weight, 2);
        assert_eq!(p.extenders[0].http_timeout, std::time::Duration::from_secs(90));
        assert!(p.extenders[0].node_cache_capable);
        assert_eq!(p.extenders[0].managed_resources, vec!["example.com/gpu".to_string()]);
        assert_eq!(p.extenders[1].url_prefix, "http://ignorable");
        assert_eq!(
            p.extenders[1].http_timeout,
            crate::engine::extender::DEFAULT_EXTENDER_TIMEOUT,
            "httpTimeout 0 or unset is 5s"
        );
    }
    let placement = "apiVersion: placement/v1\nkind: PolicyConfiguration\npolicies:\n- name: a\nextenders:\n- urlPrefix: https://e\n  bindVerb: bind\n  enableHTTPS: true\n  tlsConfig:\n    caData: aGVsbG8=\n";
    let file = parse_policy_file(placement).expect("loads");
    let e = &file.policies[0].extenders[0];
    assert!(e.is_binder() && e.enable_https);
    assert_eq!(e.tls.as_ref().map(|t| t.ca_data.as_slice()), Some(&b"hello"[..]));
    let bad = "apiVersion: placement/v1\nkind: PolicyConfiguration\npolicies:\n- name: a\nextenders:\n- urlPrefix: http://e\n  tlsConfig:\n    caData: '%%'\n";
    let err = parse_policy_file(bad).unwrap_err().to_string();
    assert!(err.starts_with("extenders[0].tlsConfig.caData: not base64"), "{err}");
}

/// DynamicResourcesArgs.filterTimeout as kube-scheduler reads it (`defaults.go`: 10s when unset
/// with DRASchedulerFilterTimeout on; `validation_pluginargs.go`: zero or positive, zero
/// disabling the timeout), in both file formats.
#[test]
fn dynamic_resources_filter_timeout_is_read_defaulted_and_validated() {
    use std::time::Duration;
    let dra = |args: &str| {
        format!("{KSC}profiles:\n- schedulerName: a\n  pluginConfig:\n  - name: DynamicResources\n    args:\n{args}")
    };
    let timeout = |text: &str| parse(text).policies[0].dynamic_resources.filter_timeout;
    assert_eq!(
        timeout(&format!("{KSC}profiles:\n- schedulerName: a\n")),
        Duration::from_secs(10)
    );
    assert_eq!(
        timeout(&dra("      kind: DynamicResourcesArgs\n")),
        Duration::from_secs(10)
    );
    assert_eq!(
        timeout(&dra("      filterTimeout: 250ms\n")),
        Duration::from_millis(250)
    );
    assert_eq!(timeout(&dra("      filterTimeout: 1m30s\n")), Duration::from_secs(90));
    assert_eq!(timeout(&dra("      filterTimeout: 0s\n")), Duration::ZERO);
    // A profile with the timeout at zero applies none.
    let zero = crate::engine::profile::Profile::new(parse(&dra("      filterTimeout: 0s\n")).policies.remove(0));
    assert_eq!(zero.dra_filter_timeout, None);
    let ten = crate::engine::profile::Profile::new(Policy::kube_default());
    assert_eq!(ten.dra_filter_timeout, Some(Duration::from_secs(10)));
    // Validation, naming the field.
    for (args, message) in [
        ("      filterTimeout: -1s\n", "must be zero or positive"),
        ("      filterTimeout: \"10\"\n", "missing unit"),
        ("      filterTimeout: 10\n", "expected a string"),
        ("      filterTimeout: soon\n", "invalid duration"),
        ("      filterTimout: 1s\n", "unknown field `filterTimout`"),
    ] {
        let e = error(&dra(args));
        let text = e.to_string();
        let want = if message.starts_with("unknown") || message.starts_with("expected") {
            "profiles[0].pluginConfig[0].args: "
        } else {
            "profiles[0].pluginConfig[0].args.filterTimeout: "
        };
        assert!(text.starts_with(want) && text.contains(message), "{args}: {text}");
    }
    // bindingTimeout (PreBind's wait for binding conditions): read, 600s by default, at least 1s.
    let file = parse(&dra("      filterTimeout: 5s\n      bindingTimeout: 10m\n"));
    assert_eq!(
        file.policies[0].dynamic_resources.filter_timeout,
        Duration::from_secs(5)
    );
    assert_eq!(
        file.policies[0].dynamic_resources.binding_timeout,
        Duration::from_secs(600)
    );
    let file = parse(&dra("      bindingTimeout: 90s\n"));
    assert_eq!(
        file.policies[0].dynamic_resources.binding_timeout,
        Duration::from_secs(90)
    );
    let file = parse(&dra("      filterTimeout: 5s\n"));
    assert_eq!(
        file.policies[0].dynamic_resources.binding_timeout,
        Duration::from_secs(600),
        "kube's default"
    );
    for bad in ["500ms", "0s", "-1m"] {
        let text = error(&dra(&format!("      bindingTimeout: {bad}\n"))).to_string();
        assert!(
            text.starts_with("profiles[0].pluginConfig[0].args.bindingTimeout: ") && text.contains("at least 1 second"),
            "{bad}: {text}"
        );
    }
    // Placement's format.
    let placement = |args: &str| {
        format!(
            "apiVersion: placement/v1\nkind: PolicyConfiguration\npolicies:\n- name: p\n  dynamicResources:\n{args}"
        )
    };
    assert_eq!(timeout(&placement("    filterTimeout: 2s\n")), Duration::from_secs(2));
    assert_eq!(
        timeout("apiVersion: placement/v1\nkind: PolicyConfiguration\npolicies:\n- name: p\n"),
        Duration::from_secs(10)
    );
    let e = error(&placement("    filterTimeout: -2s\n")).to_string();
    assert!(
        e.starts_with("policies[0].dynamicResources.filterTimeout: ") && e.contains("must be zero or positive"),
        "{e}"
    );
}

/// Placement's DevicePacking: off by default, enabled by naming its score in either format, its
/// `matchAttributes` read strictly and checked.
#[test]
fn device_packing_is_enabled_by_name_with_its_args() {
    use crate::engine::plugins::dynamicresources::device_packing::PCIE_ROOT;
    let packs = |p: &Policy| crate::engine::profile::Profile::new(p.clone()).device_packing.clone();
    assert!(packs(&Policy::kube_default()).is_none(), "off by default");
    let ksc = |args: &str| {
        format!(
            "{KSC}profiles:\n- schedulerName: a\n  plugins:\n    score:\n      enabled:\n      - name: DevicePacking\n        weight: 10\n{args}"
        )
    };
    let file = parse(&ksc(""));
    assert_eq!(scores(&file.policies[0])["DevicePacking"], 10);
    let on = packs(&file.policies[0]).expect("enabled");
    assert_eq!(on.match_attributes, vec![PCIE_ROOT.to_string()], "the default domain");
    let file = parse(&ksc(
        "  pluginConfig:\n  - name: DevicePacking\n    args:\n      kind: DevicePackingArgs\n      matchAttributes: [gpu.example.com/numa]\n",
    ));
    let on = packs(&file.policies[0]).expect("enabled");
    assert_eq!(on.match_attributes, vec!["gpu.example.com/numa".to_string()]);
    let e = error(&ksc(
        "  pluginConfig:\n  - name: DevicePacking\n    args:\n      matchAttributes: [numa]\n",
    ))
    .to_string();
    assert!(
        e.starts_with("profiles[0].pluginConfig[0].args.matchAttributes[0]: ") && e.contains("not a qualified"),
        "{e}"
    );
    let e = error(&ksc(
        "  pluginConfig:\n  - name: DevicePacking\n    args:\n      matchAttribute: []\n",
    ))
    .to_string();
    assert!(e.contains("unknown field `matchAttribute`"), "{e}");
    // Placement's format.
    let placement = "apiVersion: placement/v1\nkind: PolicyConfiguration\npolicies:\n- name: p\n  scores:\n  - name: DevicePacking\n    weight: 5\n  devicePacking:\n    matchAttributes: [resource.kubernetes.io/pcieRoot, gpu.example.com/numa]\n";
    let file = parse(placement);
    let on = packs(&file.policies[0]).expect("enabled");
    assert_eq!(on.match_attributes.len(), 2);
    let e = error(&placement.replace("gpu.example.com/numa", "/numa")).to_string();
    assert!(e.starts_with("policies[0].devicePacking.matchAttributes[1]: "), "{e}");
}

/// kube 1.37's PodGroup plugins and extension points in a KubeSchedulerConfiguration: enabled (as a
/// configuration written for kube with GenericWorkload and TopologyAwareWorkloadScheduling names
/// them) they are accepted and noted; at a point they do not extend, or disabled by name, refused.
#[test]
fn pod_group_plugins_and_points_are_read_as_kube_reads_them() {
    let with = |plugins: &str| format!("{KSC}profiles:\n- schedulerName: a\n  plugins:\n{plugins}");
    let file = parse(&with(
        "    multiPoint:\n      enabled:\n      - name: GangScheduling\n      - name: TopologyPlacementGenerator\n    placementScore:\n      enabled:\n      - name: PodGroupPodsCount\n        weight: 1\n    placementGenerate:\n      enabled:\n      - name: TopologyPlacementGenerator\n",
    ));
    // The engine's policy is kube's default: the PodGroup plugins are not filters or scores.
    assert_eq!(file.policies[0].scores, Policy::kube_default().scores);
    let ignored = file.ignored.join("\n");
    for field in [
        "profiles[0].plugins.multiPoint.enabled[0] (GangScheduling)",
        "profiles[0].plugins.multiPoint.enabled[1] (TopologyPlacementGenerator)",
        "profiles[0].plugins.placementScore.enabled[0] (PodGroupPodsCount)",
        "profiles[0].plugins.placementGenerate.enabled[0] (TopologyPlacementGenerator)",
    ] {
        assert!(ignored.contains(field), "{field} not in {ignored}");
    }
    let e = error(&with(
        "    placementScore:\n      enabled:\n      - name: GangScheduling\n",
    ))
    .to_string();
    assert!(
        e.starts_with("profiles[0].plugins.placementScore.enabled[0].name: ")
            && e.contains("does not extend placementScore"),
        "{e}"
    );
    let e = error(&with(
        "    multiPoint:\n      disabled:\n      - name: GangScheduling\n",
    ))
    .to_string();
    assert!(
        e.starts_with("profiles[0].plugins.multiPoint.disabled[0].name: ") && e.contains("cannot be disabled"),
        "{e}"
    );
    // A plugin placement does not run, at a PodGroup point: not implemented, as before.
    let e = error(&with(
        "    podGroupPostFilter:\n      enabled:\n      - name: Coscheduling\n",
    ))
    .to_string();
    assert!(e.contains("is not implemented by placement"), "{e}");
}

/// The profile `gpu` with `plugins` (YAML under `plugins:`, indented by four), parsed.
fn gpu_profile(plugins: &str) -> Result<PolicyFile, PolicyConfigError> {
    parse_policy_file(&format!("{KSC}profiles:\n- schedulerName: gpu\n  plugins:\n{plugins}"))
}

#[test]
fn default_preemption_runs_where_the_profiles_post_filter_set_holds_it() {
    // kube-scheduler's multiPoint expansion (`expandMultiPointPlugins`) of its default set, with
    // DefaultPreemption a PostFilter, PreEnqueue and PodGroupPostFilter plugin
    // (`defaultpreemption/default_preemption.go`).
    let on = |plugins: &str| match gpu_profile(plugins) {
        Ok(f) => f.policies[0].default_preemption,
        Err(e) => panic!("{plugins}: {e}"),
    };
    assert!(parse(&format!("{KSC}profiles:\n- schedulerName: a\n")).policies[0].default_preemption);
    for enabled in [
        "    postFilter:\n      enabled:\n      - name: DefaultPreemption\n",
        "    multiPoint:\n      enabled:\n      - name: DefaultPreemption\n",
        "    multiPoint:\n      disabled:\n      - name: '*'\n      enabled:\n      - name: NodeResourcesFit\n      - name: DefaultPreemption\n",
        // Disabled at multiPoint, enabled at the point: the point's own setting wins.
        "    multiPoint:\n      disabled:\n      - name: DefaultPreemption\n    postFilter:\n      enabled:\n      - name: DefaultPreemption\n",
        "    postFilter:\n      disabled:\n      - name: '*'\n      enabled:\n      - name: DefaultPreemption\n",
    ] {
        assert!(on(enabled), "{enabled}");
    }
    for disabled in [
        "    postFilter:\n      disabled:\n      - name: DefaultPreemption\n",
        "    postFilter:\n      disabled:\n      - name: '*'\n",
        "    multiPoint:\n      disabled:\n      - name: DefaultPreemption\n",
        "    multiPoint:\n      disabled:\n      - name: '*'\n      enabled:\n      - name: NodeResourcesFit\n",
    ] {
        assert!(!on(disabled), "{disabled}");
    }
    // Disabling it at postFilter is honoured, not noted as ignored.
    let f = gpu_profile("    postFilter:\n      disabled:\n      - name: DefaultPreemption\n").unwrap();
    assert!(f.ignored.iter().all(|i| !i.contains("postFilter")), "{:?}", f.ignored);
    // Its PreEnqueue and PodGroupPostFilter are placement's in every profile: noted.
    let f = gpu_profile("    preEnqueue:\n      enabled:\n      - name: DefaultPreemption\n").unwrap();
    assert!(f.policies[0].default_preemption);
    assert!(
        f.ignored
            .iter()
            .any(|i| i.starts_with("profiles[0].plugins.preEnqueue.enabled[0] (DefaultPreemption)")),
        "{:?}",
        f.ignored
    );
    let f = gpu_profile("    multiPoint:\n      disabled:\n      - name: DefaultPreemption\n").unwrap();
    assert!(
        f.ignored
            .iter()
            .any(|i| i.starts_with("profiles[0].plugins.podGroupPostFilter (DefaultPreemption)")),
        "{:?}",
        f.ignored
    );
    // It extends no filter: kube's `plugin "DefaultPreemption" does not extend filter plugin`.
    assert_eq!(
        gpu_profile("    filter:\n      enabled:\n      - name: DefaultPreemption\n").unwrap_err(),
        invalid(
            "profiles[0].plugins.filter.enabled[0].name",
            "plugin \"DefaultPreemption\" does not extend filter"
        )
    );
}
