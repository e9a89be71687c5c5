//! CRC-32C (Castagnoli), the checksum of every extent and metadata structure.

const CRC32C: crc::Crc<u32, crc::Table<16>> =
    crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);

/// CRC-32C of `data` (iSCSI parameters: reflected, init and xorout 0xffffffff).
#[must_use]
pub fn crc32c(data: &[u8]) -> u32 {
    CRC32C.checksum(data)
}
