/* A C firmware's view of raidcore: a RAID-6 pool over six in-memory disks (512-byte blocks)
   plus a hot spare, all reached through callbacks. Writes the bytes of a real file, fails a
   member, rebuilds onto the spare by maintenance steps, verifies every block, shuts down,
   imports the pool again from the disks in another order and verifies again.

   Usage: raid6_rebuild FILE. Prints one line per phase; exit status 0 only if all passed. */
#include "raidcore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DISKS 7 /* six members + one spare */
#define BLOCK 512u
#define DISK_BLOCKS 8192u /* 4 MiB */
#define FAILED_SLOT 2

struct mem_disk {
  uint8_t *data;
  int dead; /* a pulled disk: every request fails */
  unsigned long reads, writes, flushes;
};

static struct mem_disk disks[DISKS];

static int32_t disk_read(void *ctx, uint64_t lba, uint8_t *buf, uint32_t blocks, uint64_t *bad) {
  struct mem_disk *d = ctx;
  (void)bad;
  if (d->dead) return RAIDCORE_DISK_FAILED;
  memcpy(buf, d->data + lba * BLOCK, (size_t)blocks * BLOCK);
  d->reads++;
  return RAIDCORE_DISK_OK;
}

static int32_t disk_write(void *ctx, uint64_t lba, const uint8_t *buf, uint32_t blocks,
                          uint64_t *bad) {
  struct mem_disk *d = ctx;
  (void)bad;
  if (d->dead) return RAIDCORE_DISK_FAILED;
  memcpy(d->data + lba * BLOCK, buf, (size_t)blocks * BLOCK);
  d->writes++;
  return RAIDCORE_DISK_OK;
}

static int32_t disk_flush(void *ctx) {
  struct mem_disk *d = ctx;
  if (d->dead) return RAIDCORE_DISK_FAILED;
  d->flushes++;
  return RAIDCORE_DISK_OK;
}

static raidcore_disk disk_ops(int i) {
  raidcore_disk d = {&disks[i], BLOCK, DISK_BLOCKS, disk_read, disk_write, disk_flush};
  return d;
}

#define CHECK(call)                                                                      \
  do {                                                                                   \
    int32_t rc_ = (call);                                                                \
    if (rc_ != RAIDCORE_OK) {                                                            \
      fprintf(stderr, "%s:%d: %s: %s (%d)\n", __FILE__, __LINE__, #call,                 \
              raidcore_error_name(rc_), (int)rc_);                                       \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

/* Reads every block of the LUN back and compares it with the file's bytes. */
static unsigned verify(raidcore_pool *pool, uint16_t lun, const uint8_t *want, size_t blocks,
                       const char *when) {
  uint8_t buf[RAIDCORE_BLOCK_BYTES];
  for (size_t i = 0; i < blocks; i++) {
    CHECK(raidcore_read(pool, lun, i, buf, sizeof buf));
    if (memcmp(buf, want + i * RAIDCORE_BLOCK_BYTES, sizeof buf) != 0) {
      fprintf(stderr, "block %zu differs %s\n", i, when);
      exit(1);
    }
  }
  printf("verified %zu blocks %s\n", blocks, when);
  return (unsigned)blocks;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s FILE\n", argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 2;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (size <= 0) {
    fprintf(stderr, "%s is empty\n", argv[1]);
    return 2;
  }
  size_t blocks = ((size_t)size + RAIDCORE_BLOCK_BYTES - 1) / RAIDCORE_BLOCK_BYTES;
  if (blocks > 1024) blocks = 1024; /* at most 4 MiB of it */
  uint8_t *data = calloc(blocks, RAIDCORE_BLOCK_BYTES);
  size_t got = fread(data, 1, blocks * RAIDCORE_BLOCK_BYTES, f);
  fclose(f);
  printf("file: %s, %zu bytes in %zu blocks of 4 KiB\n", argv[1], got, blocks);

  for (int i = 0; i < DISKS; i++) disks[i].data = calloc(DISK_BLOCKS, BLOCK);
  raidcore_disk members[6], spare = disk_ops(6);
  for (int i = 0; i < 6; i++) members[i] = disk_ops(i);

  raidcore_config cfg;
  CHECK(raidcore_config_default(&cfg));
  cfg.level = RAIDCORE_RAID6;
  cfg.strip_bytes = 4096;
  cfg.max_extent_blocks = 8;
  cfg.compression = true;
  cfg.zil_slots = 16;
  cfg.segment_stripes = 4;
  cfg.max_segments = 256;
  size_t arena_len = raidcore_memory_bytes(&cfg, 6);
  if (arena_len == 0) {
    fprintf(stderr, "configuration refused\n");
    return 1;
  }
  uint8_t *arena = malloc(arena_len);
  printf("arena: %zu bytes\n", arena_len);

  /* Too small an arena is refused with a code, not a crash. */
  raidcore_pool *pool = NULL;
  const uint8_t uuid[16] = "raidcore-capi-t1";
  if (raidcore_pool_create(members, 6, &spare, 1, &cfg, uuid, arena, arena_len / 2, &pool) !=
      RAIDCORE_E_MEMORY) {
    fprintf(stderr, "a half-size arena was not refused\n");
    return 1;
  }
  CHECK(raidcore_pool_create(members, 6, &spare, 1, &cfg, uuid, arena, arena_len, &pool));
  uint16_t lun;
  CHECK(raidcore_lun_create(pool, "c-lun", 2048, &lun));
  for (size_t i = 0; i < blocks; i++)
    CHECK(raidcore_write(pool, lun, i, data + i * RAIDCORE_BLOCK_BYTES, RAIDCORE_BLOCK_BYTES,
                         false));
  CHECK(raidcore_flush(pool));
  printf("wrote %zu blocks\n", blocks);
  verify(pool, lun, data, blocks, "after writing");

  /* Errors come back as codes. */
  uint8_t one[RAIDCORE_BLOCK_BYTES];
  if (raidcore_read(pool, lun, 2048, one, sizeof one) != RAIDCORE_E_OUT_OF_RANGE ||
      raidcore_read(pool, lun, 0, one, 100) != RAIDCORE_E_MISALIGNED ||
      raidcore_read(pool, 7, 0, one, sizeof one) != RAIDCORE_E_NO_SUCH_LUN) {
    fprintf(stderr, "wrong error codes\n");
    return 1;
  }

  /* Member 2 dies; the spare takes its slot and is rebuilt in bounded steps. */
  disks[FAILED_SLOT].dead = 1;
  CHECK(raidcore_fail_disk(pool, FAILED_SLOT));
  raidcore_status st;
  CHECK(raidcore_pool_status(pool, &st));
  if (st.health != RAIDCORE_HEALTH_DEGRADED || !st.rebuilding || st.spares != 0) {
    fprintf(stderr, "after the failure: health %u rebuilding %d spares %u\n", st.health,
            st.rebuilding, st.spares);
    return 1;
  }
  verify(pool, lun, data, blocks, "degraded");
  unsigned steps = 0;
  unsigned long rebuilt = 0;
  raidcore_maintenance_report rep;
  do {
    CHECK(raidcore_maintenance(pool, &rep));
    rebuilt += rep.rebuilt_stripes;
    if (++steps > 100000) {
      fprintf(stderr, "the rebuild does not finish\n");
      return 1;
    }
  } while (!rep.idle);
  CHECK(raidcore_pool_status(pool, &st));
  if (st.health != RAIDCORE_HEALTH_ONLINE || st.member_state[FAILED_SLOT] != RAIDCORE_MEMBER_ONLINE) {
    fprintf(stderr, "after the rebuild: health %u\n", st.health);
    return 1;
  }
  printf("rebuilt %lu stripes onto the spare in %u maintenance steps (spare: %lu writes)\n",
         rebuilt, steps, disks[6].writes);
  unsigned long dead_reads = disks[FAILED_SLOT].reads;
  verify(pool, lun, data, blocks, "after the rebuild");
  if (disks[FAILED_SLOT].reads != dead_reads || disks[6].writes == 0) {
    fprintf(stderr, "the dead disk was read, or the spare never written\n");
    return 1;
  }
  /* Member 4 is failed by hand, misses writes, and comes back (resynced). */
  if (raidcore_online(pool, 4) != RAIDCORE_E_INVALID) {
    fprintf(stderr, "online of a member in sync was not refused\n");
    return 1;
  }
  CHECK(raidcore_fail_disk(pool, 4));
  for (size_t i = 0; i < blocks; i++)
    CHECK(raidcore_write(pool, lun, i, data + i * RAIDCORE_BLOCK_BYTES, RAIDCORE_BLOCK_BYTES,
                         false));
  CHECK(raidcore_flush(pool));
  CHECK(raidcore_online(pool, 4));
  unsigned long resynced = 0;
  do {
    CHECK(raidcore_maintenance(pool, &rep));
    resynced += rep.rebuilt_stripes;
  } while (!rep.idle);
  CHECK(raidcore_pool_status(pool, &st));
  if (st.health != RAIDCORE_HEALTH_ONLINE || resynced == 0) {
    fprintf(stderr, "after online: health %u, %lu stripes resynced\n", st.health, resynced);
    return 1;
  }
  printf("member 4 back online: %lu stripes resynced\n", resynced);
  verify(pool, lun, data, blocks, "after online");
  CHECK(raidcore_pool_shutdown(pool));

  /* Import from the surviving disks in another order: the spare first. */
  raidcore_disk found[6];
  int n = 0;
  found[n++] = disk_ops(6);
  for (int i = 5; i >= 0; i--)
    if (i != FAILED_SLOT) found[n++] = disk_ops(i);
  memset(arena, 0xA5, arena_len);
  raidcore_import_report ir;
  CHECK(raidcore_pool_import(found, (uint32_t)n, &cfg, arena, arena_len, &pool, &ir));
  printf("imported: %u missing, %u refused, behind mask 0x%x\n", ir.missing, ir.refused,
         (unsigned)ir.behind_slots);
  verify(pool, lun, data, blocks, "after import");
  CHECK(raidcore_pool_shutdown(pool));
  printf("PASSED\n");
  for (int i = 0; i < DISKS; i++) free(disks[i].data);
  free(arena);
  free(data);
  return 0;
}
