//! `raidcore serve --tcp` over TLS with real clients: x509 certificates made at test time
//! (rcgen), `nbdinfo` (`nbds://…?tls-certificates=`) and `qemu-io` (`tls-creds-x509`) with a
//! client certificate served; no certificate, one from another CA, and a plaintext client
//! refused; 200 idle connections do not lock a client out; plaintext TCP only with
//! `--insecure`.

#[path = "support/raidcore.rs"]
mod rc;
mod support;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;

use rc::{RAIDCORE, stop};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use support::{Served, run_ok, tool};

/// A CA: its certificate (PEM) and what signs with it.
fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = p.self_signed(&key).unwrap();
    (cert.pem(), Issuer::new(p, key))
}

/// A leaf certificate and its key (PEM), signed by `issuer`.
fn leaf(issuer: &Issuer<'_, KeyPair>, names: &[&str], server: bool) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut p =
        CertificateParams::new(names.iter().map(|s| (*s).to_string()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name.push(
        DnType::CommonName,
        if server { "localhost" } else { "client" },
    );
    p.extended_key_usages = vec![if server {
        ExtendedKeyUsagePurpose::ServerAuth
    } else {
        ExtendedKeyUsagePurpose::ClientAuth
    }];
    let cert = p.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// Credential directories, laid out as nbdkit, qemu and libnbd read them.
struct Creds {
    server: PathBuf,
    client: PathBuf,
    /// The CA, and no client certificate.
    anonymous: PathBuf,
    /// A client certificate from another CA.
    rogue: PathBuf,
}

fn write(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir.to_path_buf()
}

fn creds(tmp: &Path) -> Creds {
    let (ca_pem, issuer) = ca("raidcore test CA");
    let (srv, srv_key) = leaf(&issuer, &["localhost", "127.0.0.1"], true);
    let (cli, cli_key) = leaf(&issuer, &["client"], false);
    let (_, other) = ca("another CA");
    let (rogue, rogue_key) = leaf(&other, &["client"], false);
    Creds {
        server: write(
            &tmp.join("server"),
            &[
                ("ca-cert.pem", &ca_pem),
                ("server-cert.pem", &srv),
                ("server-key.pem", &srv_key),
            ],
        ),
        client: write(
            &tmp.join("client"),
            &[
                ("ca-cert.pem", &ca_pem),
                ("client-cert.pem", &cli),
                ("client-key.pem", &cli_key),
            ],
        ),
        anonymous: write(&tmp.join("anonymous"), &[("ca-cert.pem", &ca_pem)]),
        rogue: write(
            &tmp.join("rogue"),
            &[
                ("ca-cert.pem", &ca_pem),
                ("client-cert.pem", &rogue),
                ("client-key.pem", &rogue_key),
            ],
        ),
    }
}

/// A pool in `tmp/pool` served on a Unix socket and TCP with TLS (client certificates
/// required); the server and its TCP port.
fn serve_tls(tmp: &Path, c: &Creds, extra: &[&str]) -> (Served, u16) {
    let dir = tmp.join("pool");
    let d = dir.to_str().unwrap();
    run_ok(Command::new(RAIDCORE).args([
        "create",
        "--dir",
        d,
        "--level",
        "raid5",
        "--disks",
        "3",
        "--disk-size",
        "64M",
        "--luns",
        "1",
        "--lun-size",
        "8M",
    ]));
    let mut args = vec![
        "--tcp",
        "127.0.0.1:0",
        "--tls-certificates",
        c.server.to_str().unwrap(),
        "--tls-verify-peer",
    ];
    args.extend_from_slice(extra);
    let server = Served::start(RAIDCORE, d, &tmp.join("nbd.sock"), &args);
    let log = server.log();
    let at = log.find("nbds://127.0.0.1:").expect("the TLS listen line") + 17;
    let port = log[at..].split('/').next().unwrap().parse().unwrap();
    (server, port)
}

fn nbdinfo(port: u16, certs: &Path) -> std::process::Output {
    tool("nbdinfo", "libnbd-bin")
        .arg(format!(
            "nbds://localhost:{port}/lun0?tls-certificates={}",
            certs.display()
        ))
        .output()
        .unwrap()
}

fn qemu_io_tls(port: u16, certs: &Path, cmds: &[&str]) -> std::process::Output {
    let mut c = tool("qemu-io", "qemu-utils");
    c.arg("--object").arg(format!(
        "tls-creds-x509,id=tls0,endpoint=client,dir={}",
        certs.display()
    ));
    c.arg("--image-opts").arg(format!(
        "driver=nbd,host=localhost,port={port},export=lun0,tls-creds=tls0"
    ));
    for cmd in cmds {
        c.args(["-c", cmd]);
    }
    c.output().unwrap()
}

#[test]
fn tls_clients_with_a_certificate_are_served_and_others_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let c = creds(tmp.path());
    let (server, port) = serve_tls(tmp.path(), &c, &[]);
    let o = nbdinfo(port, &c.client);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("with TLS") && out.contains("8388608"), "{out}");
    let o = qemu_io_tls(
        port,
        &c.client,
        &["write -P 0x6b 0 1M", "read -P 0x6b 0 1M"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (who, dir) in [("no certificate", &c.anonymous), ("another CA", &c.rogue)] {
        let o = nbdinfo(port, dir);
        assert!(!o.status.success(), "{who}: served");
        let o = qemu_io_tls(port, dir, &["read -P 0x6b 0 1M"]);
        assert!(!o.status.success(), "{who}: qemu-io served");
    }
    let o = tool("nbdinfo", "libnbd-bin")
        .arg(format!("nbd://localhost:{port}/lun0"))
        .output()
        .unwrap();
    assert!(!o.status.success(), "a plaintext client was served");
    // The Unix socket is as before (plaintext, local only).
    let sock = tmp.path().join("nbd.sock");
    run_ok(tool("qemu-io", "qemu-utils").args([
        "-f",
        "raw",
        &format!("nbd+unix:///lun0?socket={}", sock.display()),
        "-c",
        "read -P 0x6b 0 1M",
    ]));
    let log = stop(server);
    assert!(log.contains("TLS handshake failed"), "{log}");
}

/// 200 connections that never say a word do not keep a client out: the oldest that has not
/// chosen an export makes room (64 connections by default), and a TLS client gets through.
#[test]
fn two_hundred_idle_connections_do_not_lock_out_a_client() {
    let tmp = tempfile::tempdir().unwrap();
    let c = creds(tmp.path());
    let (server, port) = serve_tls(tmp.path(), &c, &["--max-connections", "16"]);
    let idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let o = qemu_io_tls(
        port,
        &c.client,
        &["write -P 0x21 0 64k", "read -P 0x21 0 64k"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = nbdinfo(port, &c.client);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    drop(idle);
    let log = stop(server);
    assert!(log.contains("to make room"), "{log}");
}

#[test]
fn plaintext_tcp_needs_insecure() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("pool");
    let d = d.to_str().unwrap();
    run_ok(Command::new(RAIDCORE).args([
        "create",
        "--dir",
        d,
        "--level",
        "raid5",
        "--disks",
        "3",
        "--disk-size",
        "64M",
    ]));
    let o = Command::new(RAIDCORE)
        .args(["serve", "--dir", d, "--tcp", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--insecure"));
    let server = Served::start(
        RAIDCORE,
        d,
        &tmp.path().join("nbd.sock"),
        &["--tcp", "127.0.0.1:0", "--insecure"],
    );
    assert!(
        server.log().contains("plaintext, no authentication"),
        "{}",
        server.log()
    );
    stop(server);
}
