//! Bad clients, bad requests, concurrency and shutdown, over real sockets with a hand-written
//! client (real clients never send these bytes).

mod nbd_common;

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::rc::Rc;

use nbd_common::{GUARD, RawClient, TestServer, assert_bytes, pattern, run_ok, tool};
use raidcore_sim::nbd::proto;
use raidcore_sim::nbd::testing::MemBackend;
use raidcore_sim::nbd::{
    BLOCK, Backend, BackendError, BackendErrorKind, BackendResult, ExportInfo, ServeConfig, Server,
};

const MIB: u64 = 1 << 20;

fn one_lun(size: u64) -> Vec<ExportInfo> {
    let mut ro = ExportInfo::new("ro", 64 << 10);
    ro.read_only = true;
    vec![ExportInfo::new("lun0", size), ro]
}

/// After `c` misbehaves, the server closes it: nothing more arrives, then EOF.
fn assert_closed(mut c: TcpStream) {
    c.set_read_timeout(Some(GUARD)).expect("timeout");
    let mut rest = Vec::new();
    match c.read_to_end(&mut rest) {
        Ok(_) => assert!(
            rest.is_empty(),
            "server sent {} bytes before closing",
            rest.len()
        ),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
}

#[test]
fn garbage_bytes_close_only_the_guilty_connection() {
    let mut srv = TestServer::start(one_lun(MIB));
    let addr = srv.addr.expect("tcp");
    // A client that keeps its connection open and idle throughout.
    let (mut idle, _) = RawClient::open(addr, "lun0");

    // An HTTP request instead of client flags.
    let mut c = TcpStream::connect(addr).expect("connect");
    let mut greeting = [0u8; 18];
    c.read_exact(&mut greeting).expect("greeting");
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("send");
    assert_closed(c);

    // Valid flags, then an option with a bad magic.
    let mut c = RawClient::connect(addr);
    c.send(&[0xde; 40]);
    assert_closed(c.s);

    // A good session, then a request with a bad magic.
    let (mut c, _) = RawClient::open(addr, "lun0");
    assert_eq!(c.write(1, 0, &[9u8; 512]), 0);
    c.send(&pattern(3, 100));
    assert_closed(c.s);

    // Everyone else is still served.
    assert_eq!(idle.write(7, 4096, &[5u8; 100]), 0);
    assert_bytes(&idle.read_ok(8, 0, 512), &[9u8; 512], "read");
    let (mut fresh, size) = RawClient::open(addr, "lun0");
    assert_eq!(size, MIB);
    assert_bytes(&fresh.read_ok(1, 4096, 100), &[5u8; 100], "read");
    fresh.disconnect();
    idle.disconnect();
    srv.stop();
}

#[test]
fn a_client_that_disconnects_mid_write_never_reaches_the_backend() {
    let mut srv = TestServer::start(one_lun(MIB));
    let addr = srv.addr.expect("tcp");

    // Half a write payload, then the client goes away.
    let (mut c, _) = RawClient::open(addr, "lun0");
    let payload = pattern(1, 65536);
    c.request(proto::CMD_WRITE, 0, 1, 8192, 65536, &payload[..30_000]);
    drop(c);
    // Half a request header.
    let (mut c, _) = RawClient::open(addr, "lun0");
    c.send(&proto::REQUEST_MAGIC.to_be_bytes());
    c.send(&[0, 0, 0, 1, 0, 0]);
    drop(c);
    // Half an option.
    let mut c = RawClient::connect(addr);
    c.send(&proto::IHAVEOPT.to_be_bytes());
    drop(c);

    let (mut c, _) = RawClient::open(addr, "lun0");
    assert_bytes(&c.read_ok(2, 8192, 65536), &vec![0u8; 65536], "read");
    c.disconnect();
    let mem = srv.stop();
    // Checked after the server stopped, so every connection thread has finished.
    assert_eq!(
        mem.counters().writes,
        0,
        "a partial write reached the backend"
    );
    assert_eq!(mem.allocated_blocks(), 0);
}

#[test]
fn unknown_exports_are_refused_and_negotiation_goes_on() {
    let mut srv = TestServer::start(one_lun(MIB));
    let addr = srv.addr.expect("tcp");
    let mut c = RawClient::connect(addr);
    let r = c.go("nope");
    assert_eq!(r.len(), 1, "no information about an unknown export: {r:?}");
    assert_eq!(r[0].kind, proto::REP_ERR_UNKNOWN);
    c.send_option(proto::OPT_INFO, &RawClient::go_data("lun1", &[]));
    assert_eq!(c.option_reply().kind, proto::REP_ERR_UNKNOWN);
    // The same connection can still choose a real export.
    let r = c.go("lun0");
    assert_eq!(r.last().map(|r| r.kind), Some(proto::REP_ACK));
    assert_eq!(c.write(1, 0, b"hello"), 0);
    c.disconnect();

    // NBD_OPT_EXPORT_NAME cannot return an error: the server closes the connection.
    let mut c = RawClient::connect(addr);
    c.send_option(proto::OPT_EXPORT_NAME, b"nope");
    assert_closed(c.s);
    // ... and accepts a real one (no zeroes were negotiated: size and flags only).
    let mut c = RawClient::connect(addr);
    c.send_option(proto::OPT_EXPORT_NAME, b"lun0");
    let r = c.read_exact(10);
    assert_eq!(u64::from_be_bytes(r[..8].try_into().unwrap()), MIB);
    assert_bytes(&c.read_ok(2, 0, 5), b"hello", "read");
    c.disconnect();
    srv.stop();
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scripted session of bad requests, each asserted"
)]
fn bad_requests_get_errors_and_the_connection_carries_on() {
    let size = MIB;
    let mut srv = TestServer::start(one_lun(size));
    let addr = srv.addr.expect("tcp");
    let (mut c, _) = RawClient::open(addr, "lun0");
    let max = 32 << 20;

    let expect = |c: &mut RawClient,
                  cmd: u16,
                  flags: u16,
                  offset: u64,
                  length: u32,
                  payload: &[u8],
                  want: u32| {
        c.request(cmd, flags, 77, offset, length, payload);
        let (err, h, _) = c.reply(None);
        assert_eq!(h, 77);
        assert_eq!(
            err, want,
            "cmd {cmd} flags {flags:#x} offset {offset} length {length}"
        );
    };
    // Oversized: a read, and a write whose 32 MiB + 1 payload the server must skip.
    expect(&mut c, proto::CMD_READ, 0, 0, max + 1, &[], proto::EINVAL);
    expect(
        &mut c,
        proto::CMD_WRITE,
        0,
        0,
        max + 1,
        &vec![0xee; max as usize + 1],
        proto::EINVAL,
    );
    expect(
        &mut c,
        proto::CMD_WRITE_ZEROES,
        0,
        0,
        max + 1,
        &[],
        proto::EINVAL,
    );
    // Zero length.
    expect(&mut c, proto::CMD_READ, 0, 0, 0, &[], proto::EINVAL);
    expect(&mut c, proto::CMD_WRITE, 0, 0, 0, &[], proto::EINVAL);
    expect(&mut c, proto::CMD_TRIM, 0, 0, 0, &[], proto::EINVAL);
    // Past the end: EINVAL for reads and trims, ENOSPC for writes (as the spec asks).
    expect(
        &mut c,
        proto::CMD_READ,
        0,
        size - 100,
        200,
        &[],
        proto::EINVAL,
    );
    expect(
        &mut c,
        proto::CMD_WRITE,
        0,
        size - 100,
        200,
        &[0xee; 200],
        proto::ENOSPC,
    );
    expect(
        &mut c,
        proto::CMD_WRITE_ZEROES,
        0,
        size,
        1,
        &[],
        proto::ENOSPC,
    );
    expect(
        &mut c,
        proto::CMD_TRIM,
        0,
        size - 4096,
        8192,
        &[],
        proto::EINVAL,
    );
    expect(
        &mut c,
        proto::CMD_READ,
        0,
        u64::MAX - 10,
        100,
        &[],
        proto::EINVAL,
    );
    expect(
        &mut c,
        proto::CMD_WRITE,
        0,
        u64::MAX,
        1,
        &[0xee],
        proto::ENOSPC,
    );
    // Flags that do not apply, unknown commands, reserved fields.
    expect(
        &mut c,
        proto::CMD_WRITE,
        0x8000,
        0,
        512,
        &[0xee; 512],
        proto::EINVAL,
    );
    expect(
        &mut c,
        proto::CMD_WRITE,
        proto::CMD_FLAG_NO_HOLE,
        0,
        512,
        &[0xee; 512],
        proto::EINVAL,
    );
    expect(&mut c, 99, 0, 0, 512, &[], proto::EINVAL);
    expect(&mut c, 7, 0, 0, 512, &[], proto::EINVAL); // block status was not negotiated
    expect(&mut c, proto::CMD_FLUSH, 0, 4096, 0, &[], proto::EINVAL);

    // None of it reached the backend, and the connection still works.
    assert_bytes(&c.read_ok(1, size - 100, 100), &[0u8; 100], "read");
    assert_bytes(&c.read_ok(2, 0, 512), &[0u8; 512], "read");
    assert_eq!(c.write(3, size - 100, &[1u8; 100]), 0);
    assert_bytes(&c.read_ok(4, size - 100, 100), &[1u8; 100], "read");
    c.disconnect();

    // A read-only export refuses writes, trims and write-zeroes with EPERM; reads work.
    let (mut c, _) = RawClient::open(addr, "ro");
    expect(&mut c, proto::CMD_WRITE, 0, 0, 512, &[1; 512], proto::EPERM);
    expect(&mut c, proto::CMD_TRIM, 0, 0, 4096, &[], proto::EPERM);
    expect(
        &mut c,
        proto::CMD_WRITE_ZEROES,
        0,
        0,
        4096,
        &[],
        proto::EPERM,
    );
    assert_bytes(&c.read_ok(1, 0, 4096), &[0u8; 4096], "read");
    c.disconnect();

    let mem = srv.stop();
    assert_eq!(
        mem.counters().writes,
        1,
        "only the one valid write: {:?}",
        mem.counters()
    );
}

#[test]
fn pipelined_requests_are_answered_by_handle() {
    let mut srv = TestServer::start(one_lun(4 * MIB));
    let (mut c, _) = RawClient::open(srv.addr.expect("tcp"), "lun0");
    let n = 200u64;
    // Odd sizes at odd offsets; regions do not overlap.
    let region = |i: u64| (i * 12_345, 1000 + (i as usize * 37) % 9000);
    for i in 0..n {
        let (off, len) = region(i);
        c.request(proto::CMD_WRITE, 0, i, off, len as u32, &pattern(i, len));
    }
    c.request(proto::CMD_FLUSH, 0, n, 0, 0, &[]);
    let mut seen = vec![false; n as usize + 1];
    for _ in 0..=n {
        let (err, h, _) = c.reply(None);
        assert_eq!(err, 0);
        assert!(
            !std::mem::replace(&mut seen[h as usize], true),
            "handle {h} answered twice"
        );
    }
    for i in 0..n {
        let (off, len) = region(i);
        c.request(proto::CMD_READ, 0, 1000 + i, off, len as u32, &[]);
    }
    let mut got = HashMap::new();
    for _ in 0..n {
        // Replies are in request order here (one owner thread), which tells the data length.
        let h = got.len() as u64;
        let (err, handle, data) = c.reply(Some(region(h).1));
        assert_eq!((err, handle), (0, 1000 + h));
        got.insert(h, data);
    }
    for i in 0..n {
        assert_bytes(&got[&i], &pattern(i, region(i).1), &format!("region {i}"));
    }
    c.disconnect();
    srv.stop();
}

#[test]
fn eight_connections_write_the_same_export_at_once() {
    let mut srv = TestServer::start(one_lun(8 * MIB));
    let addr = srv.addr.expect("tcp");
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            std::thread::spawn(move || {
                let (mut c, _) = RawClient::open(addr, "lun0");
                // Interleaved 3000-byte stripes: neighbours share 4 KiB blocks, so partial-block
                // merges from different connections race for the same blocks.
                for round in 0..40u64 {
                    let i = round * 8 + t;
                    assert_eq!(c.write(i, i * 3000, &pattern(i, 3000)), 0);
                }
                c.request(proto::CMD_FLUSH, 0, 9999, 0, 0, &[]);
                assert_eq!(c.reply(None).0, 0);
                c.disconnect();
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread");
    }
    let (mut c, _) = RawClient::open(addr, "lun0");
    for i in 0..320u64 {
        assert_bytes(
            &c.read_ok(i, i * 3000, 3000),
            &pattern(i, 3000),
            format!("stripe {i}").as_str(),
        );
    }
    c.disconnect();
    let mem = srv.stop();
    assert_eq!(mem.counters().flushes, 8);
}

#[test]
fn a_client_that_stops_reading_replies_does_not_hold_up_the_others() {
    let mut srv = TestServer::start_with(one_lun(16 * MIB), |c| {
        c.shutdown_grace = std::time::Duration::from_millis(100);
    });
    let addr = srv.addr.expect("tcp");
    // 200 reads of 1 MiB that are never collected: this connection's socket buffers fill, its
    // writer blocks, and its reader stops at the per-connection credit limit.
    let (mut slow, _) = RawClient::open(addr, "lun0");
    for i in 0..200u64 {
        slow.request(proto::CMD_READ, 0, i, (i % 16) * MIB, MIB as u32, &[]);
    }
    // Another client is served all along.
    let (mut c, _) = RawClient::open(addr, "lun0");
    for i in 0..100u64 {
        assert_eq!(c.write(i, i * 5000, &pattern(i, 5000)), 0);
    }
    for i in 0..100u64 {
        assert_bytes(
            &c.read_ok(i, i * 5000, 5000),
            &pattern(i, 5000),
            &format!("write {i}"),
        );
    }
    c.disconnect();
    // A stopping server gives the slow client `shutdown_grace` to take its replies, then drops it.
    let mem = srv.stop();
    assert_eq!(mem.counters().shutdowns, 1);
    drop(slow);
}

#[test]
fn replies_the_socket_cannot_take_at_once_arrive_whole_and_in_order() {
    let mut srv = TestServer::start(one_lun(16 * MIB));
    let addr = srv.addr.expect("tcp");
    let (mut c, _) = RawClient::open(addr, "lun0");
    for i in 0..16u64 {
        assert_eq!(c.write(i, i * MIB, &pattern(i, MIB as usize)), 0);
    }
    // 48 MiB of read replies, with small writes and flushes between them, asked for before any
    // reply is collected: the socket takes the first part of a reply, the rest waits in the
    // connection's queue, and everything behind it queues too.
    for i in 0..48u64 {
        c.request(proto::CMD_READ, 0, 100 + i, (i % 16) * MIB, MIB as u32, &[]);
        let at = 16 * MIB - 4096 * (i + 1);
        c.request(
            proto::CMD_WRITE,
            0,
            200 + i,
            at,
            4096,
            &pattern(200 + i, 4096),
        );
        c.request(proto::CMD_FLUSH, 0, 300 + i, 0, 0, &[]);
    }
    for i in 0..48u64 {
        let (err, h, data) = c.reply(Some(MIB as usize));
        assert_eq!((err, h), (0, 100 + i));
        let want = if i % 16 == 15 {
            // The last MiB holds the small writes made before this read.
            let mut w = pattern(15, MIB as usize);
            for k in 0..i {
                let at = (MIB - 4096 * (k + 1)) as usize;
                w[at..at + 4096].copy_from_slice(&pattern(200 + k, 4096));
            }
            w
        } else {
            pattern(i % 16, MIB as usize)
        };
        assert_bytes(&data, &want, &format!("read {i}"));
        assert_eq!(c.reply(None), (0, 200 + i, Vec::new()));
        assert_eq!(c.reply(None), (0, 300 + i, Vec::new()));
    }
    // The queue has drained: replies go straight out again.
    assert_eq!(c.write(1000, 0, &pattern(1000, 4096)), 0);
    assert_bytes(&c.read_ok(1001, 0, 4096), &pattern(1000, 4096), "after");
    c.disconnect();
    let mem = srv.stop();
    assert_eq!(mem.counters().flushes, 48);
}

#[test]
fn shutdown_with_clients_connected_finishes_what_was_answered() {
    let mut srv = TestServer::start(one_lun(4 * MIB));
    let addr = srv.addr.expect("tcp");
    let (mut idle, _) = RawClient::open(addr, "lun0");
    let negotiating = RawClient::connect(addr);
    let (mut busy, _) = RawClient::open(addr, "lun0");
    let n = 64u64;
    for i in 0..n {
        busy.request(proto::CMD_WRITE, 0, i, i * 4096, 4096, &pattern(i, 4096));
    }
    let mem = srv.stop();
    // Whatever was answered is in the backend; the rest was never started.
    let tail = busy.read_to_end();
    assert_eq!(tail.len() % 16, 0, "whole replies only");
    for r in tail.chunks(16) {
        let h = u64::from_be_bytes(r[8..16].try_into().unwrap());
        assert_eq!(&r[4..8], &[0, 0, 0, 0]);
        assert_bytes(
            &mem.read_bytes(0, h * 4096, 4096),
            &pattern(h, 4096),
            &format!("answered write {h}"),
        );
    }
    assert_eq!(mem.counters().shutdowns, 1);
    assert!(idle.read_to_end().is_empty());
    drop(negotiating);
}

#[test]
fn unix_socket_serves_nbdinfo_and_qemu_io() {
    let dir = tempfile::tempdir().expect("tmp");
    let sock = dir.path().join("nbd.sock");
    let sock2 = sock.clone();
    let mut srv = TestServer::start_with(one_lun(2 * MIB), move |c| {
        c.tcp = None;
        c.unix = Some(sock2);
    });
    assert!(srv.addr.is_none());
    let uri = format!("nbd+unix:///lun0?socket={}", sock.display());
    let out = run_ok(tool("nbdinfo", "libnbd-bin").arg("--size").arg(&uri));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        (2 * MIB).to_string()
    );
    let out = run_ok(
        tool("qemu-io", "qemu-utils")
            .args([
                "-f",
                "raw",
                "-c",
                "write -P 0x5a 3 10000",
                "-c",
                "read -P 0x5a 3 10000",
            ])
            .arg(&uri),
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("fail"));
    let mem = srv.stop();
    assert_eq!(mem.read_bytes(0, 0, 4), vec![0, 0, 0, 0x5a]);
    assert!(!sock.exists(), "socket file removed at shutdown");
}

#[test]
fn a_stale_unix_socket_is_replaced_but_a_live_one_is_not_taken_over() {
    let dir = tempfile::tempdir().expect("tmp");
    let sock = dir.path().join("nbd.sock");
    // A socket file left behind by a server that died.
    drop(std::os::unix::net::UnixListener::bind(&sock).expect("bind"));
    assert!(sock.exists());
    let path = sock.clone();
    let mut srv = TestServer::start_with(one_lun(MIB), move |c| {
        c.tcp = None;
        c.unix = Some(path);
    });
    let config = ServeConfig {
        tcp: None,
        unix: Some(sock.clone()),
        ..ServeConfig::default()
    };
    let err = Server::start(config, || Ok(MemBackend::new(one_lun(MIB)))).expect_err("path in use");
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse, "{err}");
    // The first server still serves on it.
    let uri = format!("nbd+unix:///lun0?socket={}", sock.display());
    let out = run_ok(tool("nbdinfo", "libnbd-bin").arg("--size").arg(&uri));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), MIB.to_string());
    srv.stop();
}

#[test]
fn connections_over_the_limit_are_refused() {
    let mut srv = TestServer::start_with(one_lun(MIB), |c| c.max_connections = 2);
    let addr = srv.addr.expect("tcp");
    let (mut a, _) = RawClient::open(addr, "lun0");
    let (mut b, _) = RawClient::open(addr, "lun0");
    let third = TcpStream::connect(addr).expect("connect");
    assert_closed(third);
    assert_eq!(a.write(1, 0, &[1]), 0);
    assert_bytes(&b.read_ok(1, 0, 1), &[1], "read");
    a.disconnect();
    b.disconnect();
    srv.stop();
}

/// A backend that is deliberately not `Send` (`Rc`), built on the owner thread, which fails
/// I/O to chosen blocks with chosen kinds.
struct RcBackend {
    data: Rc<RefCell<Vec<u8>>>,
    fail: HashMap<u64, BackendErrorKind>,
}

impl RcBackend {
    fn check(&self, lba: u64, blocks: u64) -> BackendResult {
        match (lba..lba + blocks).find_map(|l| self.fail.get(&l)) {
            Some(kind) => Err(BackendError::new(*kind, "injected")),
            None => Ok(()),
        }
    }
}

impl Backend for RcBackend {
    fn exports(&self) -> Vec<ExportInfo> {
        vec![ExportInfo::new("lun0", self.data.borrow().len() as u64)]
    }
    fn read(&mut self, _e: usize, lba: u64, buf: &mut [u8]) -> BackendResult {
        self.check(lba, (buf.len() / BLOCK) as u64)?;
        let at = lba as usize * BLOCK;
        buf.copy_from_slice(&self.data.borrow()[at..at + buf.len()]);
        Ok(())
    }
    fn write(&mut self, _e: usize, lba: u64, data: &[u8], _fua: bool) -> BackendResult {
        self.check(lba, (data.len() / BLOCK) as u64)?;
        let at = lba as usize * BLOCK;
        self.data.borrow_mut()[at..at + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn flush(&mut self, _e: usize) -> BackendResult {
        Err(BackendError::new(
            BackendErrorKind::ReadOnly,
            "pool is degraded beyond redundancy",
        ))
    }
}

#[test]
fn a_backend_that_is_not_send_works_and_its_errors_map_to_nbd_errors() {
    let config = ServeConfig {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        ..ServeConfig::default()
    };
    let server = Server::start(config, || {
        let fail = HashMap::from([
            (1, BackendErrorKind::Io),
            (2, BackendErrorKind::NoSpace),
            (3, BackendErrorKind::Invalid),
        ]);
        Ok(RcBackend {
            data: Rc::new(RefCell::new(vec![0u8; 16 * BLOCK])),
            fail,
        })
    })
    .expect("start");
    let addr = server.tcp_addr().expect("tcp");
    let flag = server.shutdown_flag();
    let run = std::thread::spawn(move || server.run());

    let (mut c, size) = RawClient::open(addr, "lun0");
    assert_eq!(size, 16 * BLOCK as u64);
    assert_eq!(c.write(1, 100, b"abc"), 0);
    assert_bytes(&c.read_ok(2, 99, 5), &[0, b'a', b'b', b'c', 0], "read");
    assert_eq!(c.read(3, 4096, 10).0, proto::EIO);
    assert_eq!(c.write(4, 8192 + 5, b"x"), proto::ENOSPC);
    assert_eq!(c.write(5, 3 * 4096, &[1; 4096]), proto::EINVAL);
    // An unaligned write whose merge read fails is not written at all.
    assert_eq!(c.write(6, 4000, &[2; 200]), proto::EIO);
    assert_bytes(&c.read_ok(7, 3990, 106), &[0; 106], "head block untouched");
    c.request(proto::CMD_FLUSH, 0, 8, 0, 0, &[]);
    assert_eq!(c.reply(None).0, proto::EPERM);
    // An error reply to a read carries no data: the next reply follows at once.
    let mut want = vec![0u8; 4096];
    want[100..103].copy_from_slice(b"abc");
    assert_bytes(&c.read_ok(9, 0, 4096), &want, "read");
    c.disconnect();
    flag.store(true, std::sync::atomic::Ordering::SeqCst);
    run.join().expect("thread").expect("run");
}

#[test]
fn a_failing_backend_factory_is_reported_by_start() {
    let config = ServeConfig {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        ..ServeConfig::default()
    };
    let err = Server::start(config, || -> std::io::Result<RcBackend> {
        Err(std::io::Error::other("no disks"))
    })
    .expect_err("start fails");
    assert!(err.to_string().contains("no disks"), "{err}");

    let config = ServeConfig {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        ..ServeConfig::default()
    };
    let err = Server::start(config, || {
        Ok(RcBackend {
            data: Rc::new(RefCell::new(vec![0u8; 1000])),
            fail: HashMap::new(),
        })
    })
    .expect_err("size not a multiple of 4096");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
}
