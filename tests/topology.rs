//! Topology: CPU lists, declared topologies and the `FLOWLINE_TOPOLOGY` variable, and the
//! sysfs reader on fixture trees of real layouts (two sockets with SMT, offline CPUs, a
//! memory-only node) and on malformed ones, plus this machine's own sysfs.
#![cfg(all(feature = "std", not(any(loom, miri))))]

use std::fs;
use std::path::{Path, PathBuf};

use flowline::topology::{parse_cpu_list, Source, Topology, TopologyError, MAX_CPUS};

/// A sysfs-like tree in a fresh temporary directory, removed when dropped.
struct Fixture(PathBuf);

impl Fixture {
    fn new(name: &str) -> Fixture {
        let dir = std::env::temp_dir().join(format!(
            "flowline-topology-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("node")).unwrap();
        fs::create_dir_all(dir.join("cpu")).unwrap();
        Fixture(dir)
    }
    fn file(&self, rel: &str, text: &str) -> &Self {
        let p = self.0.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
        self
    }
    fn node(&self, id: usize, cpulist: &str) -> &Self {
        self.file(&format!("node/node{id}/cpulist"), &format!("{cpulist}\n"))
    }
    fn siblings(&self, cpu: usize, list: &str) -> &Self {
        self.file(
            &format!("cpu/cpu{cpu}/topology/thread_siblings_list"),
            &format!("{list}\n"),
        )
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Two sockets of 8 cores with 2 threads each, Linux numbering: node 0 has CPUs 0-7 and
/// their siblings 16-23, node 1 has 8-15 and 24-31.
fn two_sockets_smt(f: &Fixture, online: &str) {
    f.node(0, "0-7,16-23").node(1, "8-15,24-31");
    f.file("cpu/online", &format!("{online}\n"));
    f.file("node/online", "0-1\n"); // not a node directory: ignored
    for cpu in 0..16 {
        let list = format!("{cpu},{}", cpu + 16);
        f.siblings(cpu, &list).siblings(cpu + 16, &list);
    }
}

#[test]
fn cpu_lists_parse_and_bad_ones_say_why() {
    assert_eq!(parse_cpu_list("0-7,16-23").unwrap().len(), 16);
    assert_eq!(parse_cpu_list(" 3,1,2,1 \n").unwrap(), [1, 2, 3]);
    assert_eq!(parse_cpu_list("5").unwrap(), [5]);
    assert_eq!(parse_cpu_list("\n").unwrap(), Vec::<usize>::new());
    for bad in ["0-", "-3", "a", "1,,2", "3-1", "1-a", "0x1", "-"] {
        let e = parse_cpu_list(bad).unwrap_err();
        assert!(
            matches!(e, TopologyError::BadCpuList { .. }),
            "{bad}: {e:?}"
        );
        assert!(
            e.to_string().contains("0-7,16-23"),
            "the message shows the form: {e}"
        );
    }
    assert!(parse_cpu_list(&MAX_CPUS.to_string()).is_err());
    assert!(parse_cpu_list("0-99999999999999999999").is_err());
    assert_eq!(
        parse_cpu_list(&format!("{}", MAX_CPUS - 1)).unwrap(),
        [MAX_CPUS - 1]
    );
}

#[test]
fn declared_topologies_and_their_errors() {
    let t = Topology::parse_declared("0;1").unwrap();
    assert_eq!(t.nodes().len(), 2);
    assert_eq!((t.node_of(0), t.node_of(1)), (Some(0), Some(1)));
    assert_eq!(t.source(), Source::Declared);
    assert_eq!(t.smt_siblings(1), [1]);
    let t = Topology::declared(&[&[3, 2, 2], &[0]]).unwrap();
    assert_eq!(t.nodes()[0].cpus, [2, 3]);
    assert_eq!(t.cpus().collect::<Vec<_>>(), [0, 2, 3]);
    for bad in ["", "0;", ";0", "0;0", "0-3;3-5", "0;x", "0;;1"] {
        let e = Topology::parse_declared(bad).unwrap_err();
        assert!(
            matches!(e, TopologyError::BadDeclaration { .. }),
            "{bad:?}: {e:?}"
        );
        assert!(
            e.to_string().contains("';'"),
            "the message shows the form: {e}"
        );
    }
    assert!(Topology::declared(&[]).is_err());
    assert!(Topology::declared(&[&[]]).is_err());
    assert!(Topology::declared(&[&[MAX_CPUS]]).is_err());
}

#[test]
fn two_sockets_with_smt() {
    let f = Fixture::new("smt");
    two_sockets_smt(&f, "0-31");
    f.node(2, ""); // a memory-only node (CXL memory, for instance)
    let t = Topology::from_sysfs(f.path()).unwrap();
    assert_eq!(t.source(), Source::Sysfs);
    assert_eq!(t.nodes().len(), 2, "the memory-only node is left out");
    assert_eq!(t.nodes()[1].id, 1);
    assert_eq!(t.nodes()[0].cpus.len(), 16);
    assert_eq!(
        (t.node_of(3), t.node_of(19), t.node_of(27)),
        (Some(0), Some(0), Some(1))
    );
    assert_eq!(t.smt_siblings(3), [3, 19]);
    assert_eq!(t.smt_siblings(27), [11, 27]);
    assert_eq!(t.cpus().count(), 32);
}

#[test]
fn offline_cpus_are_left_out() {
    let f = Fixture::new("offline");
    two_sockets_smt(&f, "0-5,7-23,25-31");
    let t = Topology::from_sysfs(f.path()).unwrap();
    assert_eq!(t.node_of(6), None);
    assert_eq!(t.node_of(24), None);
    assert_eq!(
        t.smt_siblings(22),
        [22],
        "its offline sibling is not listed"
    );
    assert_eq!(t.cpus().count(), 30);
    // A node whose CPUs are all offline is left out; node numbers are kept.
    let f = Fixture::new("offline-node");
    f.node(0, "0-1").node(1, "2-3").node(3, "4-5");
    f.file("cpu/online", "0-1,4-5\n");
    let t = Topology::from_sysfs(f.path()).unwrap();
    assert_eq!(t.nodes().iter().map(|n| n.id).collect::<Vec<_>>(), [0, 3]);
    assert_eq!(
        t.node_of(5),
        Some(1),
        "node_of gives the position in nodes()"
    );
}

#[test]
fn malformed_sysfs_trees_are_errors() {
    let missing = Fixture::new("missing");
    fs::remove_dir_all(missing.path().join("node")).unwrap();
    let e = Topology::from_sysfs(missing.path()).unwrap_err();
    assert!(matches!(e, TopologyError::Sysfs { .. }), "{e:?}");

    let bad_list = Fixture::new("badlist");
    bad_list.node(0, "0-");
    assert!(Topology::from_sysfs(bad_list.path())
        .unwrap_err()
        .to_string()
        .contains("cpulist"));

    let twice = Fixture::new("twice");
    twice.node(0, "0-3").node(1, "3-5");
    assert!(Topology::from_sysfs(twice.path())
        .unwrap_err()
        .to_string()
        .contains("two nodes"));

    let no_cpu = Fixture::new("nocpu");
    no_cpu.node(0, "");
    assert!(Topology::from_sysfs(no_cpu.path()).is_err());

    let no_self = Fixture::new("noself");
    no_self.node(0, "0-1").siblings(0, "1");
    assert!(Topology::from_sysfs(no_self.path())
        .unwrap_err()
        .to_string()
        .contains("itself"));

    let bad_online = Fixture::new("badonline");
    bad_online.node(0, "0").file("cpu/online", "zero\n");
    assert!(Topology::from_sysfs(bad_online.path()).is_err());

    let no_cpulist = Fixture::new("nocpulist");
    fs::create_dir_all(no_cpulist.path().join("node/node0")).unwrap();
    assert!(Topology::from_sysfs(no_cpulist.path()).is_err());
}

/// The only test that calls `detect` (it sets the environment variable).
#[test]
fn detect_prefers_the_environment_then_sysfs() {
    std::env::set_var("FLOWLINE_TOPOLOGY", "0;1");
    let t = Topology::detect().unwrap();
    assert_eq!(t.source(), Source::Environment);
    assert_eq!(t.nodes().len(), 2);
    std::env::set_var("FLOWLINE_TOPOLOGY", "0;0");
    let e = Topology::detect().unwrap_err();
    assert!(e.to_string().contains("two nodes"), "{e}");
    // A CPU this process cannot run on is an error, not a node nobody can pin to.
    #[cfg(target_os = "linux")]
    {
        let beyond = flowline::topology::available_cpus() + 1000;
        std::env::set_var("FLOWLINE_TOPOLOGY", format!("0;{beyond}"));
        let e = Topology::detect().unwrap_err();
        assert!(e.to_string().contains("may run on"), "{e}");
    }
    std::env::remove_var("FLOWLINE_TOPOLOGY");
    let t = Topology::detect().unwrap();
    assert!(matches!(t.source(), Source::Sysfs | Source::Fallback));
    assert!(t.cpus().count() >= 1);
    #[cfg(target_os = "linux")]
    if Path::new("/sys/devices/system/node").exists() {
        let sys = Topology::from_sysfs(Path::new("/sys/devices/system")).unwrap();
        assert_eq!(t, sys);
        for cpu in sys.cpus() {
            assert!(sys.smt_siblings(cpu).contains(&cpu));
        }
    }
}
