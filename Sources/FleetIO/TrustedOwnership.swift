#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What the ownership rules look at in a file's `stat`: its kind, owner, group and mode.
public struct FileEntry: Sendable, Hashable {
    /// The kinds of entry the rules tell apart.
    public enum Kind: Sendable, Hashable {
        case directory, regularFile, symbolicLink, other
    }

    public var kind: Kind
    public var owner: uid_t
    public var group: gid_t
    /// The permission bits with the set-user-ID, set-group-ID and sticky bits (`st_mode & 0o7777`).
    public var mode: mode_t

    /// An entry with these attributes (tests describe files without the file system).
    public init(kind: Kind, owner: uid_t, group: gid_t, mode: mode_t) {
        self.kind = kind
        self.owner = owner
        self.group = group
        self.mode = mode & 0o7777
    }

    /// The entry `stat`, `lstat` or `fstat` described.
    public init(_ status: stat) {
        let kind: Kind =
            switch status.st_mode & S_IFMT {
            case S_IFDIR: .directory
            case S_IFREG: .regularFile
            case S_IFLNK: .symbolicLink
            default: .other
            }
        self.init(kind: kind, owner: status.st_uid, group: status.st_gid, mode: status.st_mode)
    }

    /// Whether the sticky bit is set: in such a directory only root, the directory's owner and
    /// an entry's owner may remove or rename that entry.
    public var isSticky: Bool { mode & 0o1000 != 0 }
}

/// The users a privileged process lets control a file it acts on: root, and at most one more
/// (the agent's user). The rule is sshd's `StrictModes`: a file, and every directory a path
/// to it goes through, must be owned by one of them and writable by no one else (no group or
/// other write bit).
///
/// One exception, for directories that are shared by design such as `/tmp` (mode 1777): a
/// directory writable by others is accepted when it is **owned by root and sticky**. There only
/// root, the directory's owner and an entry's owner may remove or rename an entry, so the
/// entry below it — whose owner the path checks hold to the same rule — cannot be swapped by
/// anyone untrusted. A sticky directory owned by anyone else, and a shared directory without
/// the sticky bit, are refused. Access control lists are not looked at.
public struct TrustedOwners: Sendable, Hashable, CustomStringConvertible {
    /// The one user trusted besides root; `nil` when root alone is.
    public let user: uid_t?
    /// That user's name, for messages.
    public let userName: String

    /// Root and `user` (root alone when `user` is `nil` or 0); `userName` names it in messages
    /// (its id when not given).
    public init(user: uid_t?, userName: String? = nil) {
        self.user = user == 0 ? nil : user
        self.userName = userName ?? user.map { "uid \($0)" } ?? "root"
    }

    /// Root and the process's effective user: the rights a child process such as a hook gets.
    public static func rootAndEffectiveUser() -> TrustedOwners {
        let user = geteuid()
        return TrustedOwners(user: user, userName: AccountLookup.userName(of: user))
    }

    /// Whether `owner` is root or the trusted user.
    public func trusts(_ owner: uid_t) -> Bool { owner == 0 || owner == user }

    /// `root or fleetset`, or `root`.
    public var description: String { user == nil ? "root" : "root or \(userName)" }

    /// What is wrong with `entry` at `path` for a file only these owners may control, `nil`
    /// when nothing is. A symbolic link's own mode means nothing (it is always 0777): only its
    /// owner counts. The sticky exception applies to directories only (see the type's notes).
    public func problem(with entry: FileEntry, at path: String) -> OwnershipProblem? {
        guard trusts(entry.owner) else { return OwnershipProblem(path: path, entry: entry, reason: .untrustedOwner) }
        guard entry.kind != .symbolicLink, entry.mode & 0o022 != 0 else { return nil }
        if entry.kind == .directory, entry.isSticky, entry.owner == 0 { return nil }
        return OwnershipProblem(path: path, entry: entry, reason: .writableByOthers)
    }
}

/// Why a file fails ``TrustedOwners``' rule: `/opt/kiosk is writable by group 1001 (mode 0775)`.
public struct OwnershipProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong.
    public enum Reason: Sendable, Hashable {
        /// Owned by a user who is neither root nor the trusted one.
        case untrustedOwner
        /// Writable by its group or by others.
        case writableByOthers
    }

    public let path: String
    public let entry: FileEntry
    public let reason: Reason
    /// The name of the entry's owner, when known.
    public var ownerName: String?
    /// The name of the entry's group, when known.
    public var groupName: String?

    /// A problem with `entry` at `path`; names are filled in by ``named()``.
    public init(path: String, entry: FileEntry, reason: Reason, ownerName: String? = nil, groupName: String? = nil) {
        self.path = path
        self.entry = entry
        self.reason = reason
        self.ownerName = ownerName
        self.groupName = groupName
    }

    /// This problem with the owner's and group's names looked up in the system's databases.
    public func named() -> OwnershipProblem {
        var named = self
        named.ownerName = AccountLookup.userName(of: entry.owner)
        named.groupName = AccountLookup.groupName(of: entry.group)
        return named
    }

    /// The problem without the path: `is owned by user nobody (uid 65534, mode 0644)`.
    public var detail: String {
        let mode = "mode " + Self.octal(entry.mode)
        switch reason {
        case .untrustedOwner:
            let owner = ownerName.map { "user \($0) (uid \(entry.owner), \(mode))" } ?? "uid \(entry.owner) (\(mode))"
            return "is owned by \(owner)"
        case .writableByOthers:
            var writers: [String] = []
            if entry.mode & 0o020 != 0 { writers.append("group " + (groupName.map { "\($0) (gid \(entry.group))" } ?? "\(entry.group)")) }
            if entry.mode & 0o002 != 0 { writers.append("others") }
            var text = "is writable by \(writers.joined(separator: " and ")) (\(mode))"
            if entry.kind == .directory && entry.isSticky { text += " and, though sticky, not owned by root" }
            return text
        }
    }

    /// `/opt/kiosk is writable by group 1001 (mode 0775)`.
    public var description: String { "\(path) \(detail)" }

    /// `0755`, `1777`.
    static func octal(_ mode: mode_t) -> String {
        let digits = String(mode & 0o7777, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

/// A program path checked the way the kernel resolves it, component by component: every
/// directory looked up in (the root directory included), every symbolic link followed and the
/// program itself must pass ``TrustedOwners``' rule. A directory reached through a link is
/// checked where the link leads, and the directory holding the link is checked too: who may
/// change either may change what runs.
public enum TrustedPath {
    /// Why a path cannot be trusted.
    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// The path does not start with `/`.
        case notAbsolute(String)
        /// A component could not be looked up: missing, not a directory, too many links.
        case unresolvable(FileError)
        /// A component fails the ownership rule.
        case untrusted(OwnershipProblem)
        /// The path leads to something other than a regular file.
        case notARegularFile(String)

        public var description: String {
            switch self {
            case .notAbsolute(let path): "\(path) is not an absolute path"
            case .unresolvable(let error): error.description
            case .untrusted(let problem): problem.description
            case .notARegularFile(let path): "\(path) is not a regular file"
            }
        }
    }

    /// One looked-up path component: what `lstat` says of it and, for a link, its target.
    public struct Component: Sendable, Hashable {
        public var entry: FileEntry
        public var linkTarget: String?

        /// A component; `linkTarget` is for a symbolic link only.
        public init(entry: FileEntry, linkTarget: String? = nil) {
            self.entry = entry
            self.linkTarget = linkTarget
        }
    }

    /// How many links one resolution may follow (Linux's limit).
    public static let maximumLinks = 40

    /// The real path of the regular file `path` names, once every component on the way to it
    /// passed `owners`' rule; the file system is read with `lstat` and `readlink`.
    ///
    /// - Throws: the first component that fails, with its owner's and group's names.
    public static func resolveProgram(_ path: String, trusting owners: TrustedOwners) throws(Failure) -> String {
        do {
            return try resolveProgram(path, trusting: owners, lookUp: lookUpOnDisk)
        } catch .untrusted(let problem) {
            throw .untrusted(problem.named())
        }
    }

    /// ``resolveProgram(_:trusting:)`` over `lookUp`, which describes one absolute path without
    /// following a link at its end: the rule without the file system.
    public static func resolveProgram(
        _ path: String, trusting owners: TrustedOwners, lookUp: (String) throws(FileError) -> Component
    ) throws(Failure) -> String {
        guard path.hasPrefix("/") else { throw .notAbsolute(path) }
        func checked(_ path: String) throws(Failure) -> Component {
            let component: Component
            do {
                component = try lookUp(path)
            } catch {
                throw .unresolvable(error)
            }
            if let problem = owners.problem(with: component.entry, at: path) { throw .untrusted(problem) }
            return component
        }
        guard try checked("/").entry.kind == .directory else { throw .notARegularFile("/") }
        // The real directory reached so far, as names below `/`, and the names still to look up.
        var directory: [Substring] = []
        var remaining = ArraySlice(path.split(separator: "/"))
        var linksFollowed = 0
        while let name = remaining.popFirst() {
            if name == "." { continue }
            if name == ".." {
                _ = directory.popLast()  // already checked on the way down
                continue
            }
            let current = "/" + (directory + [name]).joined(separator: "/")
            let component = try checked(current)
            switch component.entry.kind {
            case .directory:
                directory.append(name)
            case .symbolicLink:
                linksFollowed += 1
                guard linksFollowed <= maximumLinks else { throw .unresolvable(FileError(path: path, operation: "resolve", code: ELOOP)) }
                let target = component.linkTarget ?? ""
                guard !target.isEmpty else { throw .unresolvable(FileError(path: current, operation: "resolve", code: ENOENT)) }
                if target.hasPrefix("/") { directory = [] }
                remaining = ArraySlice(target.split(separator: "/")) + remaining
            case .regularFile, .other:
                guard remaining.isEmpty else { throw .unresolvable(FileError(path: current, operation: "resolve", code: ENOTDIR)) }
                guard component.entry.kind == .regularFile else { throw .notARegularFile(current) }
                return current
            }
        }
        throw .notARegularFile(path)
    }

    /// `lstat`, and `readlink` for a link.
    private static func lookUpOnDisk(_ path: String) throws(FileError) -> Component {
        var status = stat()
        guard lstat(path, &status) == 0 else { throw FileError(path: path, operation: "stat") }
        let entry = FileEntry(status)
        guard entry.kind == .symbolicLink else { return Component(entry: entry) }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink(path, &buffer, buffer.count - 1)
        guard length >= 0 else { throw FileError(path: path, operation: "read link") }
        let target = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return Component(entry: entry, linkTarget: target)
    }
}

extension FileSystem {
    /// Why ``readFile(_:maximumSize:trusting:)`` did not return a file's contents.
    public enum TrustedReadError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The file could not be opened or read.
        case unreadable(FileError)
        /// The file fails the owners' rule, and was not read.
        case untrusted(OwnershipProblem)

        public var description: String {
            switch self {
            case .unreadable(let error): error.description
            case .untrusted(let problem): problem.description
            }
        }
    }

    /// The whole contents of the regular file at `path`, read only if the open file passes
    /// `owners`' rule (``TrustedOwners/problem(with:at:)``; no check when `owners` is `nil`).
    /// The check is made on the open file, so what is checked is what is read.
    public static func readFile(_ path: String, maximumSize: Int, trusting owners: TrustedOwners?) throws(TrustedReadError) -> [UInt8] {
        let descriptor: OwnedDescriptor
        do {
            descriptor = try openForReading(path)
        } catch {
            throw .unreadable(error)
        }
        var status = stat()
        guard fstat(descriptor.raw, &status) == 0 else { throw .unreadable(FileError(path: path, operation: "stat")) }
        if let owners, let problem = owners.problem(with: FileEntry(status), at: path) { throw .untrusted(problem.named()) }
        guard (status.st_mode & S_IFMT) == S_IFREG else { throw .unreadable(FileError(path: path, operation: "read", code: EISDIR)) }
        do {
            return try readAll(from: descriptor.raw, path: path, maximumSize: maximumSize, sizeHint: Int(status.st_size))
        } catch {
            throw .unreadable(error)
        }
    }
}
