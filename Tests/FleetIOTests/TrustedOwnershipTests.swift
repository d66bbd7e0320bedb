import FleetIO
import Foundation
import Testing

/// The owners' rule (sshd's `StrictModes`, with root-owned sticky directories accepted) as a
/// pure function, the program-path walk over a described file system, and both on real files.
@Suite("Trusted ownership of files and program paths")
struct TrustedOwnershipTests {
    static let agent: uid_t = 990
    static let agentOwners = TrustedOwners(user: agent, userName: "fleetset")

    static func directory(_ owner: uid_t = 0, _ mode: mode_t = 0o755, group: gid_t = 0) -> FileEntry {
        FileEntry(kind: .directory, owner: owner, group: group, mode: mode)
    }

    static func file(_ owner: uid_t = 0, _ mode: mode_t = 0o755, group: gid_t = 0) -> FileEntry {
        FileEntry(kind: .regularFile, owner: owner, group: group, mode: mode)
    }

    static func link(_ owner: uid_t = 0) -> FileEntry { FileEntry(kind: .symbolicLink, owner: owner, group: 0, mode: 0o777) }

    @Test(
        "accepted: owned by root or the agent's user and writable by no one else; a root-owned sticky directory; a link whatever its mode",
        arguments: [
            directory(), directory(agent), directory(0, 0o700), file(), file(agent, 0o644), file(0, 0o4755),
            directory(0, 0o1777), directory(0, 0o1775), link(), link(agent),
        ])
    func accepted(entry: FileEntry) {
        #expect(Self.agentOwners.problem(with: entry, at: "/x") == nil)
    }

    @Test(
        "refused, with what is wrong",
        arguments: [
            (directory(1000), "/x is owned by uid 1000 (mode 0755)"),
            (file(65534, 0o644), "/x is owned by uid 65534 (mode 0644)"),
            (link(1000), "/x is owned by uid 1000 (mode 0777)"),
            (directory(0, 0o775, group: 1001), "/x is writable by group 1001 (mode 0775)"),
            (directory(agent, 0o757), "/x is writable by others (mode 0757)"),
            (file(0, 0o777, group: 1001), "/x is writable by group 1001 and others (mode 0777)"),
            // Shared without the sticky bit, or sticky but not root's: anyone may swap what is inside.
            (directory(0, 0o777), "/x is writable by group 0 and others (mode 0777)"),
            (directory(agent, 0o1777), "/x is writable by group 0 and others (mode 1777) and, though sticky, not owned by root"),
            // The sticky bit means nothing on a file.
            (file(0, 0o1777), "/x is writable by group 0 and others (mode 1777)"),
        ])
    func refused(entry: FileEntry, message: String) {
        #expect(Self.agentOwners.problem(with: entry, at: "/x")?.description == message)
    }

    @Test("root alone: the agent's user is not trusted when there is none besides root")
    func rootAlone() {
        let owners = TrustedOwners(user: nil)
        #expect(owners.description == "root" && Self.agentOwners.description == "root or fleetset")
        #expect(owners.problem(with: Self.file(Self.agent), at: "/x")?.reason == .untrustedOwner)
        #expect(TrustedOwners(user: 0).user == nil)
    }

    /// A described file system: `/`, `/usr/bin`, `/opt/kiosk/reload`, a shared `/tmp` and more.
    static let tree: [String: TrustedPath.Component] = [
        "/": .init(entry: directory()),
        "/usr": .init(entry: directory()),
        "/usr/bin": .init(entry: directory()),
        "/usr/bin/dash": .init(entry: file()),
        "/usr/bin/sh": .init(entry: link(), linkTarget: "dash"),
        "/bin": .init(entry: link(), linkTarget: "usr/bin"),
        "/opt": .init(entry: directory()),
        "/opt/kiosk": .init(entry: directory(agent)),
        "/opt/kiosk/reload": .init(entry: file(agent)),
        "/opt/kiosk/current": .init(entry: link(), linkTarget: "../shared/./reload"),
        "/opt/shared": .init(entry: directory(0, 0o775, group: 1001)),
        "/opt/shared/reload": .init(entry: file()),
        "/opt/loop": .init(entry: link(), linkTarget: "/opt/loop"),
        "/tmp": .init(entry: directory(0, 0o1777)),
        "/tmp/ours": .init(entry: directory()),
        "/tmp/ours/reload": .init(entry: file()),
        "/tmp/theirs": .init(entry: directory(1000, 0o700)),
        "/tmp/theirs/reload": .init(entry: file()),
        "/tmp/link": .init(entry: link(1000), linkTarget: "/usr/bin/dash"),
        "/home": .init(entry: directory()),
        "/home/bob": .init(entry: directory(1000)),
        "/home/bob/reload": .init(entry: link(), linkTarget: "/usr/bin/dash"),
        "/usr/local": .init(entry: directory()),
        "/usr/local/bin": .init(entry: directory()),
        "/usr/local/bin/reload": .init(entry: link(), linkTarget: "/opt/shared/reload"),
    ]

    static func resolve(_ path: String) throws(TrustedPath.Failure) -> String {
        try TrustedPath.resolveProgram(path, trusting: agentOwners) { path throws(FileError) in
            guard let component = tree[path] else { throw FileError(path: path, operation: "stat", code: ENOENT) }
            return component
        }
    }

    @Test(
        "a program path resolves, through links absolute and relative, to a real file when every step is trusted",
        arguments: [
            ("/opt/kiosk/reload", "/opt/kiosk/reload"), ("/bin/sh", "/usr/bin/dash"), ("/usr/bin/../bin/./dash", "/usr/bin/dash"),
            ("/tmp/ours/reload", "/tmp/ours/reload"),
        ])
    func resolved(path: String, real: String) throws {
        #expect(try Self.resolve(path) == real)
    }

    @Test(
        "refused: an untrusted directory on the way, where a link leads or where the link itself lies; an untrusted entry of /tmp",
        arguments: [
            ("/opt/shared/reload", "/opt/shared is writable by group 1001 (mode 0775)"),
            // Checked where the link leads…
            ("/opt/kiosk/current", "/opt/shared is writable by group 1001 (mode 0775)"),
            ("/usr/local/bin/reload", "/opt/shared is writable by group 1001 (mode 0775)"),
            // …and where it lies: bob could point it elsewhere.
            ("/home/bob/reload", "/home/bob is owned by uid 1000 (mode 0755)"),
            // /tmp is accepted (root's, sticky), what its users own in it is not.
            ("/tmp/theirs/reload", "/tmp/theirs is owned by uid 1000 (mode 0700)"),
            ("/tmp/link", "/tmp/link is owned by uid 1000 (mode 0777)"),
        ])
    func untrusted(path: String, message: String) {
        #expect(throws: TrustedPath.Failure.self) { try Self.resolve(path) }
        do {
            _ = try Self.resolve(path)
        } catch {
            #expect(error.description == message)
        }
    }

    @Test("not a program: a relative path, a missing file, a loop of links, a directory, a file used as a directory")
    func unresolvable() {
        #expect(throws: TrustedPath.Failure.notAbsolute("reload")) { try Self.resolve("reload") }
        #expect(throws: TrustedPath.Failure.unresolvable(FileError(path: "/opt/kiosk/gone", operation: "stat", code: ENOENT))) {
            try Self.resolve("/opt/kiosk/gone")
        }
        #expect(throws: TrustedPath.Failure.unresolvable(FileError(path: "/opt/loop", operation: "resolve", code: ELOOP))) {
            try Self.resolve("/opt/loop")
        }
        #expect(throws: TrustedPath.Failure.notARegularFile("/opt/kiosk")) { try Self.resolve("/opt/kiosk") }
        #expect(throws: TrustedPath.Failure.notARegularFile("/")) { try Self.resolve("/") }
        #expect(throws: TrustedPath.Failure.unresolvable(FileError(path: "/opt/kiosk/reload", operation: "resolve", code: ENOTDIR))) {
            try Self.resolve("/opt/kiosk/reload/x")
        }
    }

    @Test(
        "on real files (as root, under the sticky /tmp): a 0755 program in a 0755 folder resolves; group-writable, or in a world-writable folder, it does not"
    )
    func realFiles() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-trust-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: base) }
        let folder = base + "/hooks"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let program = folder + "/reload"
        try Data("#!/bin/sh\n".utf8).write(to: URL(fileURLWithPath: program))
        for (path, mode) in [(base, 0o755), (folder, 0o755), (program, 0o755)] { #expect(chmod(path, mode_t(mode)) == 0) }
        let owners = TrustedOwners.rootAndEffectiveUser()
        #expect(try TrustedPath.resolveProgram(program, trusting: owners) == program)
        // Through a link in a trusted folder.
        try FileManager.default.createSymbolicLink(atPath: base + "/current", withDestinationPath: "hooks/reload")
        #expect(try TrustedPath.resolveProgram(base + "/current", trusting: owners) == program)

        #expect(chmod(program, 0o775) == 0)
        #expect(throws: TrustedPath.Failure.self) { try TrustedPath.resolveProgram(program, trusting: owners) }
        do {
            _ = try TrustedPath.resolveProgram(program, trusting: owners)
        } catch {
            // The group's name is looked up for the message.
            #expect(error.description == "\(program) is writable by group root (gid 0) (mode 0775)")
        }
        #expect(chmod(program, 0o755) == 0 && chmod(folder, 0o757) == 0)
        do {
            _ = try TrustedPath.resolveProgram(base + "/current", trusting: owners)
            Issue.record("a program in a world-writable folder passed")
        } catch {
            #expect(error.description == "\(folder) is writable by others (mode 0757)")
        }
    }

    @Test("a file read for a privileged reader: a root-owned 0644 one is read; one owned by nobody, or group-writable, is not")
    func trustedRead() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-trust-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data("{}".utf8).write(to: URL(fileURLWithPath: path))
        #expect(chmod(path, 0o644) == 0)
        let owners = TrustedOwners(user: nil)
        #expect(try FileSystem.readFile(path, maximumSize: 100, trusting: owners) == Array("{}".utf8))
        #expect(chmod(path, 0o664) == 0)
        #expect(throws: FileSystem.TrustedReadError.self) { try FileSystem.readFile(path, maximumSize: 100, trusting: owners) }
        #expect(chmod(path, 0o644) == 0 && chown(path, 65534, 65534) == 0)
        do {
            _ = try FileSystem.readFile(path, maximumSize: 100, trusting: owners)
            Issue.record("a file owned by uid 65534 was read")
        } catch {
            guard case .untrusted(let problem) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(problem.reason == .untrustedOwner && problem.entry.owner == 65534)
            #expect(problem.detail.hasPrefix("is owned by ") && problem.detail.hasSuffix("uid 65534, mode 0644)"), "\(problem.detail)")
        }
        // Without owners, no check.
        #expect(try FileSystem.readFile(path, maximumSize: 100, trusting: nil) == Array("{}".utf8))
    }
}
