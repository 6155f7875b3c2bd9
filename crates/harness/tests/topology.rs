//! Tests for `pglocks_harness::topology`, mostly against the committed sysfs
//! fixtures in `tests/fixtures` (regenerate with `fixtures/generate.py`).

use std::fs;
use std::path::{Path, PathBuf};

use pglocks_harness::topology::{
    cpu_for_thread, format_cpulist, parse_cpulist, pin_current_thread, PinPolicy, Topology,
    TopologyError,
};

fn fixture(name: &str) -> Topology {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    Topology::from_sysfs(&root).expect("fixture loads")
}

fn two_socket() -> Topology {
    fixture("2s64c-smt")
}

fn eight_node() -> Topology {
    fixture("8node")
}

/// A fresh, empty directory under Cargo's per-target temp dir.
fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("topology-{name}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().expect("has parent")).expect("create dirs");
    fs::write(path, text).expect("write file");
}

fn range(lo: usize, hi: usize) -> Vec<usize> {
    (lo..=hi).collect()
}

#[test]
fn parse_cpulist_ranges_and_singles() {
    assert_eq!(
        parse_cpulist("0-3,8,10-11\n").unwrap(),
        vec![0, 1, 2, 3, 8, 10, 11]
    );
    assert_eq!(parse_cpulist("5").unwrap(), vec![5]);
    assert_eq!(parse_cpulist(" 7-7 ").unwrap(), vec![7]);
}

#[test]
fn parse_cpulist_empty() {
    assert_eq!(parse_cpulist("").unwrap(), Vec::<usize>::new());
    assert_eq!(parse_cpulist("\n").unwrap(), Vec::<usize>::new());
}

#[test]
fn parse_cpulist_malformed() {
    for bad in [
        "a", "1-", "-1", "3-1", "1,,2", "1,", "1-2-3", "+1", "0x10", "99999999",
    ] {
        let err = parse_cpulist(bad).expect_err(bad);
        assert!(err.to_string().contains(bad.trim()), "{bad}: {err}");
    }
}

#[test]
fn format_cpulist_round_trips() {
    assert_eq!(format_cpulist(&[]), "");
    let node0: Vec<usize> = range(0, 31).into_iter().chain(range(64, 95)).collect();
    assert_eq!(format_cpulist(&node0), "0-31,64-95");
    for text in ["", "0", "0-31,64-95", "1,3,5-6", "16,0,17,1", "4-5,2-3"] {
        let ids = parse_cpulist(text).unwrap();
        assert_eq!(format_cpulist(&ids), text);
        assert_eq!(parse_cpulist(&format_cpulist(&ids)).unwrap(), ids);
    }
}

#[test]
fn two_socket_counts() {
    let topo = two_socket();
    assert_eq!(topo.model, "Fixture 2-socket 64-core SMT");
    assert_eq!(topo.nodes.len(), 2);
    assert_eq!(topo.packages(), 2);
    assert_eq!(topo.physical_cores(), 64);
    assert_eq!(topo.logical_cpus(), 128);
    let ids: Vec<usize> = topo.cpus.iter().map(|c| c.id).collect();
    assert_eq!(ids, range(0, 127));
    let cpu64 = &topo.cpus[64];
    assert_eq!(
        (cpu64.smt_rank, cpu64.package, cpu64.core, cpu64.node),
        (1, 0, 0, 0)
    );
    let cpu96 = &topo.cpus[96];
    assert_eq!(
        (cpu96.smt_rank, cpu96.package, cpu96.core, cpu96.node),
        (1, 1, 0, 1)
    );
    assert_eq!(topo.cpus[33].smt_rank, 0);
    assert_eq!(format_cpulist(&topo.nodes[1].cpus), "32-63,96-127");
}

#[test]
fn eight_node_counts() {
    let topo = eight_node();
    assert_eq!(topo.model, "Fixture 8-node 128-core");
    assert_eq!(topo.nodes.len(), 8);
    assert_eq!(topo.packages(), 2);
    assert_eq!(topo.physical_cores(), 128);
    assert_eq!(topo.logical_cpus(), 128);
    assert!(topo.cpus.iter().all(|c| c.smt_rank == 0));
    assert_eq!(topo.cpus[80].node, 5);
    assert_eq!(topo.cpus[80].package, 1);
    assert_eq!(topo.nodes[5].cpus, range(80, 95));
}

#[test]
fn compact_fills_cores_then_siblings_then_next_socket() {
    let order = two_socket().pin_order(PinPolicy::Compact).unwrap();
    let expected: Vec<usize> =
        [range(0, 31), range(64, 95), range(32, 63), range(96, 127)].concat();
    assert_eq!(order, expected);
}

#[test]
fn scatter_round_robins_over_nodes() {
    let order = eight_node().pin_order(PinPolicy::Scatter).unwrap();
    assert_eq!(order.len(), 128);
    assert_eq!(&order[..10], &[0, 16, 32, 48, 64, 80, 96, 112, 1, 17]);
    assert_eq!(order[127], 127);
}

#[test]
fn scatter_on_smt_takes_physical_cores_first() {
    let order = two_socket().pin_order(PinPolicy::Scatter).unwrap();
    assert_eq!(&order[..4], &[0, 32, 1, 33]);
    assert_eq!(&order[62..66], &[31, 63, 64, 96]);
}

#[test]
fn node_policy_uses_one_node() {
    let order = two_socket().pin_order(PinPolicy::Node(1)).unwrap();
    assert_eq!(order, [range(32, 63), range(96, 127)].concat());
}

#[test]
fn unknown_node_lists_valid_nodes() {
    let err = two_socket().pin_order(PinPolicy::Node(9)).unwrap_err();
    assert!(
        matches!(err, TopologyError::UnknownNode { node: 9, .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains('9') && msg.contains("0, 1"), "{msg}");
}

#[test]
fn none_policy_is_empty() {
    assert!(two_socket().pin_order(PinPolicy::None).unwrap().is_empty());
    assert_eq!(cpu_for_thread(&[], 0), None);
}

#[test]
fn threads_wrap_around() {
    let order = two_socket().pin_order(PinPolicy::Compact).unwrap();
    assert_eq!(cpu_for_thread(&order, 0), Some(0));
    assert_eq!(cpu_for_thread(&order, 32), Some(64));
    assert_eq!(cpu_for_thread(&order, 128), cpu_for_thread(&order, 0));
    assert_eq!(cpu_for_thread(&order, 129), Some(1));
}

#[test]
fn pin_policy_round_trips() {
    for policy in [
        PinPolicy::Compact,
        PinPolicy::Scatter,
        PinPolicy::Node(3),
        PinPolicy::None,
    ] {
        assert_eq!(policy.to_string().parse::<PinPolicy>().unwrap(), policy);
    }
    assert_eq!("node:12".parse::<PinPolicy>().unwrap(), PinPolicy::Node(12));
    assert_eq!(PinPolicy::Node(12).to_string(), "node:12");
}

#[test]
fn bad_pin_policy_lists_choices() {
    let msg = "bogus".parse::<PinPolicy>().unwrap_err().to_string();
    for word in ["bogus", "compact", "scatter", "node:N", "none"] {
        assert!(msg.contains(word), "{msg}");
    }
    for bad in ["node:", "node:x", "node:-1", "Compact", "node:+1"] {
        assert!(bad.parse::<PinPolicy>().is_err(), "{bad}");
    }
}

#[test]
fn describe_mentions_counts_nodes_and_order() {
    let text = two_socket().describe(PinPolicy::Compact);
    for needle in [
        "Fixture 2-socket 64-core SMT",
        "nodes: 2",
        "packages: 2",
        "physical cores: 64",
        "logical cpus: 128",
        "SMT threads per core: 2",
        "node 0: 0-31,64-95",
        "node 1: 32-63,96-127",
        "pin order (compact): 0-31,64-95,32-63,96-127",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let text = two_socket().describe(PinPolicy::None);
    assert!(text.contains("not pinned"), "{text}");
}

#[test]
fn sysfs_without_node_dir_is_one_node() {
    let root = scratch_dir("no-node-dir");
    write(&root, "devices/system/cpu/online", "0-3\n");
    for cpu in 0..4 {
        let dir = format!("devices/system/cpu/cpu{cpu}/topology");
        write(&root, &format!("{dir}/physical_package_id"), "0\n");
        // AMD-style numbering: SMT siblings are adjacent cpu ids.
        write(&root, &format!("{dir}/core_id"), &format!("{}\n", cpu / 2));
        let siblings = if cpu < 2 { "0-1" } else { "2-3" };
        write(&root, &format!("{dir}/thread_siblings_list"), siblings);
    }
    let topo = Topology::from_sysfs(&root).unwrap();
    assert_eq!(topo.model, "unknown");
    assert_eq!(topo.nodes.len(), 1);
    assert_eq!(topo.nodes[0].id, 0);
    assert_eq!(topo.nodes[0].cpus, vec![0, 1, 2, 3]);
    assert_eq!(topo.physical_cores(), 2);
    assert_eq!(topo.cpus[1].smt_rank, 1);
    for policy in [PinPolicy::Compact, PinPolicy::Scatter, PinPolicy::Node(0)] {
        assert_eq!(
            topo.pin_order(policy).unwrap(),
            vec![0, 2, 1, 3],
            "{policy}"
        );
    }
}

#[test]
fn missing_topology_files_make_own_cores() {
    let root = scratch_dir("no-topology");
    write(&root, "devices/system/cpu/online", "0,2\n");
    write(&root, "devices/system/node/node1/cpulist", "0-3\n");
    let topo = Topology::from_sysfs(&root).unwrap();
    assert_eq!(topo.physical_cores(), 2);
    assert_eq!(topo.cpus[1].id, 2);
    assert_eq!((topo.cpus[1].core, topo.cpus[1].package), (2, 0));
    assert_eq!(topo.nodes.len(), 1);
    assert_eq!(topo.nodes[0].id, 1);
    assert_eq!(topo.nodes[0].cpus, vec![0, 2]);
}

#[test]
fn malformed_cpulist_is_an_error() {
    let root = scratch_dir("bad-node-cpulist");
    write(&root, "devices/system/cpu/online", "0-1\n");
    write(&root, "devices/system/node/node0/cpulist", "0-x\n");
    let err = Topology::from_sysfs(&root).unwrap_err();
    assert!(matches!(err, TopologyError::Cpulist { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("node0") && msg.contains("0-x"), "{msg}");

    let root = scratch_dir("bad-online");
    write(&root, "devices/system/cpu/online", "3-1\n");
    assert!(Topology::from_sysfs(&root).is_err());
}

#[test]
fn malformed_number_and_missing_root_are_errors() {
    let root = scratch_dir("bad-core-id");
    write(&root, "devices/system/cpu/online", "0\n");
    write(&root, "devices/system/cpu/cpu0/topology/core_id", "zero\n");
    let err = Topology::from_sysfs(&root).unwrap_err();
    assert!(err.to_string().contains("zero"), "{err}");

    let err = Topology::from_sysfs(&scratch_dir("empty")).unwrap_err();
    assert!(matches!(err, TopologyError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("online"), "{err}");

    let root = scratch_dir("none-online");
    write(&root, "devices/system/cpu/online", "\n");
    let err = Topology::from_sysfs(&root).unwrap_err();
    assert!(matches!(err, TopologyError::NoCpus), "{err:?}");
}

#[test]
fn detect_finds_this_machine() {
    let topo = Topology::detect().expect("detect");
    assert!(topo.logical_cpus() >= 1);
    assert!(!topo.nodes.is_empty());
    let order = topo.pin_order(PinPolicy::Compact).unwrap();
    assert_eq!(order.len(), topo.logical_cpus());
    // Pin a scratch thread (not the test thread) to the first allowed cpu.
    let first = order[0];
    assert!(std::thread::spawn(move || pin_current_thread(first))
        .join()
        .unwrap());
}

/// A simulated machine's topology is what its sysfs tree would say: the `xeon-2s` profile
/// (2 packages × 32 cores × 2 threads, siblings numbered last) gives the same cpus and nodes as
/// the 2-socket fixture, and so the same pin orders.
#[test]
fn a_profile_topology_matches_the_sysfs_fixture_of_the_same_shape() {
    let profile = pglocks_sim::Profile::find("xeon-2s").unwrap();
    let simulated = Topology::from_profile(&profile).unwrap();
    let real = two_socket();
    assert_eq!(simulated.cpus, real.cpus);
    assert_eq!(simulated.nodes, real.nodes);
    for policy in [PinPolicy::Compact, PinPolicy::Scatter, PinPolicy::Node(1)] {
        assert_eq!(
            simulated.pin_order(policy).unwrap(),
            real.pin_order(policy).unwrap(),
            "{policy}"
        );
    }
}
