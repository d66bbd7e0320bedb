import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetTestSupport
import Foundation
import Testing

/// Two server instances on one PostgreSQL database act as one server: what one writes, the
/// other serves at once, and the devices it holds hear of it.
@Suite("Two instances on one PostgreSQL database")
struct TwoInstancesTests {
    @Test("an admin write on A wakes the device's long-poll held by B within milliseconds")
    func crossInstanceWakeUp() async throws {
        try await TestFleetServer.withTwoInstances { a, b in
            try await a.putKioskMetadata()
            let token = try await a.admin.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"], groups: ["lobby"]))
            let identity = try await b.client(token: nil).enroll(enrollmentToken: token.enrollmentToken, requestId: newRequestID())
            let onB = b.client(token: identity.deviceToken)
            var revision = try #require(try await onB.settings(app: "kiosk")).revision
            var latencies: [Duration] = []
            for (round, scope) in ["app", "group:lobby", "device:\(identity.deviceId)"].enumerated() {
                let known = revision
                let poll = Task { try await onB.settings(app: "kiosk", knownRevision: known, wait: 60) }
                try await b.waitForWaiters(app: "kiosk")
                let start = ContinuousClock.now
                _ = try await a.admin.patchValues(app: "kiosk", scope: scope, patch: ["title": .string("round \(round)")])
                let answer = try #require(try await poll.value, "the long-poll on B timed out instead of waking")
                latencies.append(start.duration(to: .now))
                #expect(answer.values["title"] == .string("round \(round)"))
                #expect(answer.revision == revision + 1)
                revision = answer.revision
            }
            // A wake-up takes one NOTIFY round trip (milliseconds alone; seconds while the whole suite
            // loads both cores); the bound only catches a missed one (the wait is 60 s).
            #expect(latencies.allSatisfy { $0 < .seconds(20) }, "wake-ups took \(latencies)")
        }
    }

    @Test("what B keeps in memory is dropped when A writes: values, metadata, a disabled device, a deleted one")
    func cachesFollowTheOtherInstance() async throws {
        try await TestFleetServer.withTwoInstances { a, b in
            try await a.putKioskMetadata()
            let device = try await a.enrollDevice()
            let onB = b.client(token: device.token)
            #expect(try await onB.settings(app: "kiosk")?.values["volume"] == 5)  // B now keeps the layers and the device
            _ = try await a.admin.patchValues(app: "kiosk", scope: "app", patch: ["volume": 7])
            try await Waiting.until(timeout: .seconds(10), "B kept serving the old values") {
                b.notifier.cache.sharedLayers(app: "kiosk", groups: []) == nil
            }
            #expect(try await onB.settings(app: "kiosk")?.values["volume"] == 7)
            try await a.putKioskMetadata(version: 2)
            try await Waiting.until(timeout: .seconds(10), "B kept the old metadata") { b.notifier.cache.metadata(app: "kiosk") == nil }
            #expect(try await onB.settings(app: "kiosk")?.schemaVersion == 2)
            _ = try await a.admin.updateDevice(id: device.id, DeviceUpdate(disabled: true))
            try await Waiting.until(timeout: .seconds(10), "B kept the enabled device") { b.notifier.cache.device(id: device.id) == nil }
            #expect(await refusal { try await onB.settings(app: "kiosk") }?.status == 401)
            let other = try await a.enrollDevice()
            #expect(try await b.client(token: other.token).settings(app: "kiosk") != nil)
            try await a.admin.deleteDevice(id: other.id)
            try await Waiting.until(timeout: .seconds(10), "B kept the deleted device") { b.notifier.cache.device(id: other.id) == nil }
            #expect(await refusal { try await b.client(token: other.token).settings(app: "kiosk") }?.status == 401)
        }
    }

    @Test("a device that moves between instances never gets an older revision, even for values changed back")
    func revisionsFollowTheDevice() async throws {
        try await TestFleetServer.withTwoInstances { a, b in
            try await a.putKioskMetadata()
            let device = try await a.enrollDevice()
            let onA = a.client(token: device.token)
            let onB = b.client(token: device.token)
            #expect(try await onB.settings(app: "kiosk")?.revision == 1)  // B keeps revision 1 for volume 5
            _ = try await a.admin.patchValues(app: "kiosk", scope: "app", patch: ["volume": 6])
            #expect(try await onA.settings(app: "kiosk")?.revision == 2)
            _ = try await a.admin.patchValues(app: "kiosk", scope: "app", patch: ["volume": nil])  // back to 5
            #expect(try await onA.settings(app: "kiosk")?.revision == 3)
            try await Waiting.until(timeout: .seconds(10), "B did not hear the changes") {
                b.notifier.cache.revision(app: "kiosk", deviceID: device.id) == nil
            }
            let onBAgain = try #require(try await onB.settings(app: "kiosk"))
            #expect(onBAgain.revision == 3 && onBAgain.values["volume"] == 5)
        }
    }

    @Test("writes through both instances are serialised: concurrent device writes with the same If-Match, one wins")
    func writesSerialisedAcrossInstances() async throws {
        try await TestFleetServer.withTwoInstances { a, b in
            try await a.putKioskMetadata()
            let device = try await a.enrollDevice()
            let revision = try #require(try await a.client(token: device.token).settings(app: "kiosk")).revision
            let outcomes = await withTaskGroup(of: Bool.self) { group in
                for index in 0..<8 {
                    let server = index.isMultiple(of: 2) ? a : b
                    group.addTask {
                        (try? await server.client(token: device.token).patchSettings(
                            app: "kiosk", patch: ["volume": .number(.integer(Int64(index)))], basedOn: revision)) != nil
                    }
                }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 }.count == 1, "\(outcomes.filter { $0 }.count) writes based on revision \(revision) succeeded")
        }
    }
}
