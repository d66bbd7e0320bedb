import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The state folder on a file system with no space left: a small tmpfs, filled by the test.
@Suite("fleetsetd on a full disk")
struct FullDiskTests {
    @Test(
        "with the state folder full, the last good settings stay, the failure is reported, retries leave no temporary files, and the agent recovers when space returns"
    )
    func fullDisk() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let state = fleet.directory + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try await Self.mountTmpfs(at: state, size: "2m")
        defer { _ = try? CLIRunner.runSynchronously(["-l", state], executable: "/usr/bin/umount") }

        let agent = try await fleet.launchAgent([["id": "panel"]])
        defer { agent.kill() }
        let first = try await fleet.waitForSettings("panel", agent: agent) { _ in true }
        try await fleet.waitForStatus("panel", agent: agent) { $0.state == .applied && $0.revision == first.revision }

        let filler = state + "/filler"
        try Self.fill(filler)
        try await fleet.set("panel", ["greeting": .string(String(repeating: "full disk ", count: 400))])
        let blocked = try #require(try await fleet.deviceClient().settings(app: "panel")).revision
        #expect(blocked > first.revision)

        // The failure reaches the server (reports go over the network, not through the disk).
        try await fleet.waitForStatusLine(
            "panel", containing: ["revision=\(blocked)", "state=error", "No space left on device"], agent: agent)
        // Several attempts (backoff: up to 1 s, 2 s, 4 s), each failing to write.
        try await Waiting.until(timeout: .seconds(30), "the agent never retried three times:\n\(agent.log)") {
            agent.log.components(separatedBy: "cannot write the settings").count > 3
        }
        #expect(fleet.settings("panel")?.revision == first.revision, "the last good settings stay")
        #expect(try Self.temporaryNames(in: fleet.layout.appDirectory("panel")) == [], "a failed write leaves no temporary name")

        // Space returns: the next attempt applies the revision, and nothing is left behind.
        try FileManager.default.removeItem(atPath: filler)
        try await fleet.waitForSettings("panel", timeout: .seconds(30), agent: agent) { $0.revision == blocked }
        try await fleet.waitForStatus("panel", agent: agent) { $0.state == .applied && $0.revision == blocked && $0.lastError == nil }
        try await fleet.waitForStatusLine("panel", containing: ["revision=\(blocked)", "state=applied"], agent: agent)
        #expect(try Self.temporaryNames(in: fleet.layout.appDirectory("panel")) == [])
    }

    static func mountTmpfs(at path: String, size: String) async throws {
        let mounted = try await CLIRunner.run(["-t", "tmpfs", "-o", "size=\(size),mode=0755", "tmpfs", path], executable: "/usr/bin/mount")
        guard mounted.status == 0 else {
            throw ProcessFailed(log: "this test mounts a tmpfs (it needs root): \(mounted.standardError)")
        }
    }

    /// Writes zeros to `path` until the file system has no space left.
    static func fill(_ path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0 else { throw ProcessFailed(log: "cannot create \(path)") }
        defer { close(descriptor) }
        let block = [UInt8](repeating: 0, count: 4096)
        while block.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) > 0 {}
        guard errno == ENOSPC else { throw ProcessFailed(log: "filling \(path) stopped with errno \(errno)") }
    }

    /// The names of interrupted or failed writes (`….tmp-<pid>-<n>`) in `folder`.
    static func temporaryNames(in folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.contains(".tmp-") }
    }
}
