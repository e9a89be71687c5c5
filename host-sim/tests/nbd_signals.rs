//! SIGTERM stops a serving server gracefully. In its own test binary: it signals this process.

mod nbd_common;

use std::sync::atomic::Ordering;

use nbd_common::RawClient;
use raidcore_sim::nbd::testing::MemBackend;
use raidcore_sim::nbd::{
    ExportInfo, ServeConfig, Server, install_shutdown_signals, read_stats_file,
};

#[test]
fn sigterm_stops_the_server_and_shuts_the_backend_down() {
    let dir = tempfile::tempdir().expect("tmp");
    let stats = dir.path().join("stats.json");
    let config = ServeConfig {
        tcp: Some("127.0.0.1:0".parse().expect("addr")),
        stats_path: Some(stats.clone()),
        ..ServeConfig::default()
    };
    install_shutdown_signals(&config.shutdown).expect("signal handlers");
    let mem = MemBackend::new(vec![ExportInfo::new("lun0", 1 << 20)]);
    let backend = mem.clone();
    let server = Server::start(config, move || Ok(backend)).expect("start");
    let addr = server.tcp_addr().expect("tcp");
    let flag = server.shutdown_flag();
    let run = std::thread::spawn(move || server.run());

    let (mut c, _) = RawClient::open(addr, "lun0");
    assert_eq!(c.write(1, 512, b"before the signal"), 0);
    assert!(!flag.load(Ordering::SeqCst));
    signal_hook::low_level::raise(signal_hook::consts::SIGTERM).expect("raise");
    assert!(
        flag.load(Ordering::SeqCst),
        "SIGTERM sets the shutdown flag"
    );
    run.join().expect("server thread").expect("run returns Ok");

    // The connected client is let go, the backend was shut down, the final stats are written.
    assert!(c.read_to_end().is_empty());
    assert_eq!(mem.counters().shutdowns, 1);
    assert_eq!(mem.read_bytes(0, 512, 17), b"before the signal");
    let s = read_stats_file(&stats).expect("stats");
    assert!(s.is_final);
    assert_eq!(s.exports[0].ops.write, 1);
}
