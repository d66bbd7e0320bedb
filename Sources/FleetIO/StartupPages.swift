#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The resident pages of the process's read-only file mappings (its code and constants, and
/// those of its shared libraries), handed back to the kernel once start-up is over.
///
/// Most of what a daemon maps is run once: argument and configuration reading, TLS set-up,
/// enrollment, schema compilation. The kernel keeps those pages resident (and charged to the
/// service) until memory runs short. `MADV_PAGEOUT` asks it to reclaim them now; the pages the
/// steady state touches come back on their first use, from the page cache or the disk. Nothing
/// writable is touched, so no data can be lost: only clean file pages are dropped.
public enum StartupPages {
    /// Linux's `MADV_PAGEOUT` (5.4 and newer); on older kernels `madvise` fails with EINVAL and
    /// nothing happens.
    static let pageOut: Int32 = 21

    /// Reclaims the pages of every read-only, file-backed mapping. Returns how many bytes of
    /// mappings were advised (not how many pages were resident).
    @discardableResult
    public static func release() -> Int {
        guard let bytes = try? FileSystem.readFile("/proc/self/maps", maximumSize: 1 << 20) else { return 0 }
        var advised = 0
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1].hasPrefix("r"), !fields[1].contains("w"), fields[5].hasPrefix("/") else { continue }
            let range = fields[0].split(separator: "-")
            guard range.count == 2, let start = UInt(range[0], radix: 16), let end = UInt(range[1], radix: 16), end > start,
                let address = UnsafeMutableRawPointer(bitPattern: start)
            else { continue }
            if madvise(address, Int(end - start), pageOut) == 0 { advised += Int(end - start) }
        }
        return advised
    }
}
