#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Users and groups in the system's databases (`/etc/passwd`, `/etc/group`, NSS), through the
/// reentrant calls: names to ids (for a configuration's `readers` and `writers`) and ids to
/// names (for messages).
public enum AccountLookup {
    /// The id of the user named `name`, or `nil` when there is none.
    public static func userID(of name: String) -> uid_t? {
        name.withCString { key in entry(as: passwd.self, { getpwnam_r(key, $0, $1, $2, $3) }) { $0.pw_uid } }
    }

    /// The id of the group named `name`, or `nil` when there is none.
    public static func groupID(of name: String) -> gid_t? {
        name.withCString { key in entry(as: group.self, { getgrnam_r(key, $0, $1, $2, $3) }) { $0.gr_gid } }
    }

    /// The name of the user `id`, `nil` when it has none.
    public static func userName(of id: uid_t) -> String? {
        entry(as: passwd.self, { getpwuid_r(id, $0, $1, $2, $3) }) { String(cString: $0.pw_name) }
    }

    /// The name of the group `id`, `nil` when it has none.
    public static func groupName(of id: gid_t) -> String? {
        entry(as: group.self, { getgrgid_r(id, $0, $1, $2, $3) }) { String(cString: $0.gr_name) }
    }

    /// The entry one reentrant lookup finds, read by `read` while its buffer lives (the
    /// strings of an entry point into it). The buffer grows on `ERANGE`: a group with many
    /// members needs more than the first 16 KiB.
    private static func entry<Entry, Value>(
        as _: Entry.Type,
        _ lookup: (UnsafeMutablePointer<Entry>, UnsafeMutablePointer<CChar>, Int, UnsafeMutablePointer<UnsafeMutablePointer<Entry>?>) ->
            Int32,
        _ read: (Entry) -> Value
    ) -> Value? {
        let entry = UnsafeMutablePointer<Entry>.allocate(capacity: 1)
        defer { entry.deallocate() }
        var result: UnsafeMutablePointer<Entry>?
        var size = 16_384
        while true {
            var buffer = [CChar](repeating: 0, count: size)
            let outcome = buffer.withUnsafeMutableBufferPointer { buffer -> (status: Int32, value: Value?) in
                let status = lookup(entry, buffer.baseAddress!, buffer.count, &result)
                guard status == 0, result != nil else { return (status, nil) }
                return (status, read(entry.pointee))
            }
            if outcome.status == ERANGE, size < 16 << 20 {
                size *= 4
                continue
            }
            return outcome.value
        }
    }
}
