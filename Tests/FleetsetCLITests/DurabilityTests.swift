import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// A 2xx for enrollment, a device write or an admin write means the write is on disk: the real
/// `fleetset-server`, killed with SIGKILL right after its answer, and watched with strace.
@Suite("Confirmed writes are durable")
struct DurabilityTests {
    static let metadata = """
        {"app": "kiosk", "version": 1, "schema": {"type": "object", "properties": {
          "volume": {"type": "integer", "default": 5, "x-writable": true}}}}
        """

    /// The admin token the server made in `directory`.
    static func adminToken(in directory: String) throws -> String {
        try String(contentsOfFile: directory + "/admin.token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("kill -9 right after the answers: after a restart, the enrollment, the device's write and the admin's write are there")
    func killAfterAnswer() async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var server = try await ServerProcess.start(in: directory.path)
        defer { server.kill() }
        let adminToken = try Self.adminToken(in: directory.path)
        var deviceID = ""
        var deviceToken = ""
        try await withHTTPClient(configuration: .init(allowInsecureHTTP: true)) { http in
            let admin = FleetClient(http: http, baseURL: server.url, token: adminToken)
            _ = try await admin.putMetadata(app: "kiosk", document: Array(Self.metadata.utf8))
            let token = try await admin.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"]))
            let identity = try await FleetClient(http: http, baseURL: server.url, token: nil)
                .enroll(enrollmentToken: token.enrollmentToken, requestId: "durability-request-01")
            (deviceID, deviceToken) = (identity.deviceId, identity.deviceToken)
            let device = FleetClient(http: http, baseURL: server.url, token: deviceToken)
            let current = try #require(try await device.settings(app: "kiosk"))
            _ = try await device.patchSettings(app: "kiosk", patch: ["volume": 7], basedOn: current.revision)
            _ = try await admin.patchValues(app: "kiosk", scope: "group:lobby", patch: ["volume": 3])
            server.signal(SIGKILL)
        }
        _ = await server.waitForExit()
        server = try await ServerProcess.start(in: directory.path)
        let restarted = server
        let (deviceValues, groupValues, effective) = try await withHTTPClient(configuration: .init(allowInsecureHTTP: true)) { http in
            let admin = FleetClient(http: http, baseURL: restarted.url, token: adminToken)
            let device = FleetClient(http: http, baseURL: restarted.url, token: deviceToken)
            return (
                try await admin.values(app: "kiosk", scope: "device:\(deviceID)").values,
                try await admin.values(app: "kiosk", scope: "group:lobby").values,
                try await device.settings(app: "kiosk")?.values["volume"]
            )
        }
        #expect(deviceValues == ["volume": 7] && groupValues == ["volume": 3] && effective == 7)
    }

    @Test("the SQLite WAL is synced before the answer of every confirmed write is sent (strace)")
    func syncedBeforeAnswer() async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess.start(in: directory.path)
        defer { server.kill() }
        let adminToken = try Self.adminToken(in: directory.path)
        let traceFile = directory.path + "/trace"
        let strace = try RunningProcess(
            "/usr/bin/strace",
            ["-f", "-y", "-s", "40", "-e", "trace=fsync,fdatasync,write,writev,sendmsg,sendto", "-o", traceFile, "-p", String(server.pid)])
        defer { strace.kill() }
        try await strace.waitForLog("attached")
        try await withHTTPClient(configuration: .init(allowInsecureHTTP: true)) { http in
            let admin = FleetClient(http: http, baseURL: server.url, token: adminToken)
            _ = try await admin.putMetadata(app: "kiosk", document: Array(Self.metadata.utf8))
            let token = try await admin.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"]))
            _ = try await FleetClient(http: http, baseURL: server.url, token: nil)
                .enroll(enrollmentToken: token.enrollmentToken, requestId: "durability-request-02")
            _ = try await admin.patchValues(app: "kiosk", scope: "app", patch: ["volume": 9])
        }
        // strace ends (and flushes its file) when the traced server does; signals may be blocked
        // in processes the test runner starts.
        server.signal(SIGKILL)
        #expect(await strace.waitForExit(timeout: .seconds(20)) != nil)
        let lines = try String(contentsOfFile: traceFile, encoding: .utf8).split(separator: "\n").map(String.init)
        // Each answer of a write (200 metadata, 201 token, 201 enrollment, 200 values) comes after a
        // sync of the WAL that no earlier answer came after.
        var lastSync = -1
        var answers = 0
        var unsynced: [String] = []
        for (index, line) in lines.enumerated() {
            if (line.contains("fdatasync(") || line.contains("fsync(")) && line.contains("fleet.sqlite-wal") { lastSync = index }
            if line.contains("HTTP/1.1 20") {
                answers += 1
                if lastSync < 0 { unsynced.append(line) }
                lastSync = -1
            }
        }
        #expect(answers == 4, "answers seen: \(answers)\n\(lines.joined(separator: "\n").suffix(4000))")
        #expect(unsynced.isEmpty, "answered before the WAL was synced: \(unsynced)")
    }
}
