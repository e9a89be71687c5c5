//! `raidcore` and `raidcore-sim` share the pool directory's layout: a pool the product made
//! (plain `Pool<FileDisk>`, `raidcore_host`) opens with `raidcore-sim`, and a pool
//! `raidcore-sim create --model hdd10k` made opens in the product with its data.

use std::process::Command;

use raidcore::pool::PoolConfig;
use raidcore::raid::Level;
use raidcore_hal::BlockSize;
use raidcore_host::dir::{CreateOptions, FileMembers, PoolDir};

fn sim(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_raidcore-sim"))
        .args(args)
        .output()
        .expect("run raidcore-sim");
    assert!(
        o.status.success(),
        "raidcore-sim {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn block(fill: u8) -> Vec<u8> {
    (0..8192u32).map(|i| fill ^ (i % 251) as u8).collect()
}

#[test]
fn a_pool_the_product_made_opens_with_raidcore_sim() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    let opts = CreateOptions {
        disks: 4,
        spares: 1,
        disk_bytes: 64 << 20,
        block_size: BlockSize::B512,
        config: PoolConfig {
            level: Level::Raid5,
            ..PoolConfig::default()
        },
        luns: 1,
        lun_bytes: 4 << 20,
        uuid: [0x42; 16],
        overwrite: false,
        sparse: true,
    };
    let mut dp = PoolDir::<FileMembers>::create(&dir, &opts, FileMembers::default()).unwrap();
    dp.pool.write(0, 8, &block(0x33), true).unwrap();
    dp.close().unwrap();

    let d = dir.to_str().unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&sim(&["scrub", "--dir", d, "--json"])).unwrap();
    assert_eq!(v["health"], "online");
    assert_eq!(v["level"], "raid5");
    assert_eq!(v["spares"], 1);
    assert_eq!(v["luns"][0]["logical_bytes"], 8192);
    assert_eq!(v["scrub_unrepairable_blocks"], 0);
}

#[test]
fn a_pool_raidcore_sim_made_with_a_device_model_opens_in_the_product() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    let d = dir.to_str().unwrap();
    sim(&[
        "create",
        "--dir",
        d,
        "--level",
        "raid6",
        "--disks",
        "5",
        "--disk-size",
        "64M",
        "--luns",
        "2",
        "--lun-size",
        "4M",
        "--model",
        "hdd10k",
    ]);
    let mut dp =
        PoolDir::<FileMembers>::open(&dir, PoolConfig::default(), FileMembers::default()).unwrap();
    assert_eq!(dp.meta.model, "hdd10k");
    assert_eq!(dp.status().health, "online");
    dp.pool.write(1, 0, &block(0x5a), true).unwrap();
    dp.close().unwrap();

    let mut dp =
        PoolDir::<FileMembers>::open(&dir, PoolConfig::default(), FileMembers::default()).unwrap();
    let mut back = vec![0u8; 8192];
    dp.pool.read(1, 0, &mut back).unwrap();
    assert_eq!(back, block(0x5a));
    dp.close().unwrap();
}
