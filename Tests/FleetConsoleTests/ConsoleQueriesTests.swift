import FleetConsole
import FleetJSON
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Logging
import PosixThreads
import Testing

/// The console's read models over the services, on the in-memory store: no socket.
@Suite("Console queries")
struct ConsoleQueriesTests {
    final class Wall: WallClock {
        func secondsSinceEpoch() -> Int64 { 1_795_000_000 }
    }

    struct Harness {
        let services = FleetServices(
            store: InMemoryStore(), adminTokenHash: Credentials.hash("fsa_console-queries-test"), wallClock: Wall(),
            logger: Logger(label: "console-queries-test") { _ in SwiftLogNoOpLogHandler() })

        func putKiosk() async throws {
            let document =
                #"{"app": "kiosk", "version": 1, "schema": {"type": "object", "properties": {"volume": {"type": "integer", "default": 5}}}}"#
            _ = try await services.admin.putMetadata(app: "kiosk", document: Array(document.utf8), force: false, actor: "test")
        }

        func enroll() async throws -> (Device, String) {
            let token = try await services.directory.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"]))
            let identity = try await services.gateway.enroll(EnrollRequest(enrollmentToken: token.enrollmentToken, requestId: token.id))
            guard case .device(let device) = try await services.auth.authenticate(authorization: "Bearer " + identity.deviceToken) else {
                throw ServiceError(500, .internalError, "not a device")
            }
            return (device, identity.deviceToken)
        }
    }

    @Test("the overview counts each app's devices on the newest revision and their states")
    func overview() async throws {
        let harness = Harness()
        try await harness.putKiosk()
        let (device, _) = try await harness.enroll()
        _ = try await harness.enroll()
        let served = try await harness.services.gateway.settings(app: "kiosk", device: device)
        try await harness.services.gateway.recordStatus(
            app: "kiosk", device: device, StatusReport(revision: served.revision, schemaVersion: 1, state: .applied, source: .agent))
        let overview = try await ConsoleQueries(harness.services).overview()
        let kiosk = try #require(overview.apps.first)
        #expect(kiosk.devices == 2 && kiosk.onNewest == 1 && kiosk.states[.applied] == 1 && kiosk.states[.waiting] == 1)
        let (_, standings) = try await ConsoleQueries(harness.services).standings(deviceID: device.id)
        #expect(standings["kiosk"]?.state == .applied)
        await #expect(throws: ServiceError.unknownDevice("d-nobody")) {
            try await ConsoleQueries(harness.services).standings(deviceID: "d-nobody")
        }
    }
}
