import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetTestSupport
import Foundation
import Testing

@Suite("Device facts and agent policies over HTTP")
struct DeviceInfoAndPolicyRouteTests {
    static let mergePatch: HTTPClient.Headers = ["Content-Type": "application/merge-patch+json"]

    @Test(
        "a device reports its facts by merge patch; admins list, show, filter and explain them; refusals say where",
        arguments: StoreKind.allCases)
    func facts(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let kiosk = try await server.enrollDevice(groups: ["lobby"])
            let other = try await server.enrollDevice(apps: ["kiosk"], groups: [])
            let first: JSONObject = [
                "os": ["id": "debian", "version": "12"], "machine": ["hostname": "kiosk-1", "arch": "x86_64"],
                "apps": ["kiosk": ["version": "2.3.1"]],
            ]
            #expect(try await kiosk.client.reportDeviceInfo(first) == first)
            server.clock.advance(by: 60)
            let after = try await kiosk.client.reportDeviceInfo(["machine": ["hostname": "kiosk-2"], "apps": ["kiosk": ["version": nil]]])
            #expect(after == ["os": ["id": "debian", "version": "12"], "machine": ["hostname": "kiosk-2", "arch": "x86_64"]])
            _ = try await other.client.reportDeviceInfo(["os": ["id": "debian", "version": "11"]])

            let record = try await server.admin.device(id: kiosk.id)
            #expect(record.info == after)
            #expect(record.infoUpdatedAt == server.clock.secondsSinceEpoch())
            #expect(try await server.admin.allDevices(where: [DeviceInfoFilter("os.version=12")!]).devices.map(\.id) == [kiosk.id])
            #expect(
                Set(try await server.admin.allDevices(where: [DeviceInfoFilter("os.id=debian")!]).devices.map(\.id)) == [
                    kiosk.id, other.id,
                ])
            #expect(
                try await server.admin.allDevices(where: [DeviceInfoFilter("os.id=debian")!, DeviceInfoFilter("os.version!=12")!]).devices
                    .map(\.id) == [other.id])
            #expect(try await server.admin.allDevices(where: [DeviceInfoFilter("machine.hostname=none")!]).devices.isEmpty)
            let explanation = try await server.admin.explain(app: "kiosk", deviceID: kiosk.id)
            #expect(explanation.deviceInfo == after)
            let badFilter = try await server.raw(.get, "/v1/admin/devices?where=os.version", token: TestFleetServer.adminToken)
            #expect(badFilter.status == 400)

            // Refusals, each naming the fact; nothing stored.
            for (body, status, fragment) in [
                (#"{"firmware": {"x": "1"}}"#, 400, "/firmware"),
                (#"{"os": {"version": 12}}"#, 400, "/os/version"),
                ("[1]", 400, "object"),
            ] {
                let answer = try await server.raw(.patch, "/v1/device/info", token: kiosk.token, headers: Self.mergePatch, body: body)
                #expect(answer.status == status, "\(body)")
                #expect(
                    String(decoding: answer.body, as: UTF8.self).contains(fragment),
                    "\(body): \(String(decoding: answer.body, as: UTF8.self))")
            }
            // Another app's facts are dropped, not refused: the rest still goes.
            let dropped = try await kiosk.client.reportDeviceInfo(["apps": ["menu": ["version": "1"]], "kernel": ["release": "6.1"]])
            #expect(dropped["apps"] == nil && dropped["kernel"] == ["release": "6.1"])
            var many = JSONObject()
            for index in 0...DeviceInfo.maximumAppFacts { many["f\(index)"] = "x" }
            let tooMany = await refusal { try await kiosk.client.reportDeviceInfo(["apps": ["kiosk": .object(many)]]) }
            #expect(tooMany?.status == 413)
            var afterKernel = after
            afterKernel["kernel"] = ["release": "6.1"]
            #expect(try await server.admin.device(id: kiosk.id).info == afterKernel)
            let admin = try await server.raw(
                .patch, "/v1/device/info", token: TestFleetServer.adminToken, headers: Self.mergePatch, body: #"{"os": {"id": "x"}}"#)
            #expect(admin.status == 403, "only a device reports facts")
            // Deleting the device deletes its facts (a device enrolled again starts without).
            try await server.admin.deleteDevice(id: other.id)
            #expect(try await server.store.deviceInfo(id: other.id) == nil)
        }
    }

    @Test(
        "policies per app, group and device: the device gets each key from the narrowest scope, learns of a change in its long-poll at once, and only when its tag differs",
        arguments: StoreKind.allCases)
    func policy(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let kiosk = try await server.enrollDevice(groups: ["lobby"])
            let settings = try #require(try await kiosk.client.settingsAnswer(app: "kiosk", policyTag: "0").document)
            #expect(try await kiosk.client.settingsAnswer(app: "kiosk", policyTag: "0").policyTag == nil, "no policy: no header")

            _ = try await server.admin.patchPolicy(scope: .app("kiosk"), ["logLevel": "notice", "pollInterval": 300])
            // A long-poll with an old tag is answered at once, whatever its wait.
            let asked = ContinuousClock.now
            let first = try await kiosk.client.settingsAnswer(app: "kiosk", knownRevision: settings.revision, wait: 30, policyTag: "0")
            #expect(asked.duration(to: .now) < .seconds(10))
            #expect(first.document == nil)
            let appTag = try #require(first.policyTag)

            // A long-poll with the current tag waits; a group change ends it with the new tag.
            let held = Task {
                try await kiosk.client.settingsAnswer(app: "kiosk", knownRevision: settings.revision, wait: 30, policyTag: appTag)
            }
            try await server.waitForWaiters(app: "kiosk")
            let started = ContinuousClock.now
            let groupPolicy = try await server.admin.patchPolicy(scope: .group("lobby"), ["pollInterval": 120, "statusReports": "brief"])
            #expect(groupPolicy == AgentPolicy(pollInterval: 120, statusReports: .brief))
            let woken = try await held.value
            #expect(started.duration(to: .now) < .seconds(10))
            let groupTag = try #require(woken.policyTag)
            #expect(groupTag != appTag)

            let (policy, tag) = try await kiosk.client.devicePolicy()
            #expect(tag == groupTag)
            let resolved = try #require(policy.apps["kiosk"])
            #expect(resolved.policy == AgentPolicy(logLevel: "notice", pollInterval: 120, statusReports: .brief))
            #expect(resolved.sources == [.logLevel: .app("kiosk"), .pollInterval: .group("lobby"), .statusReports: .group("lobby")])
            // The tag a settings answer carries is the policy's as resolved now: the server keeps
            // tags per apps and groups, and a policy at the device's own scope or a change of
            // the device's groups must not get a kept one.
            let twin = try await server.enrollDevice(groups: ["lobby"])
            func answeredTag(_ client: FleetClient) async throws -> String? {
                try await client.settingsAnswer(app: "kiosk", knownRevision: settings.revision, policyTag: "stale").policyTag
            }
            #expect(try await answeredTag(twin.client) == groupTag)
            _ = try await server.admin.patchPolicy(scope: .device(kiosk.id), ["pollInterval": 60])
            let deviceTag = try await kiosk.client.devicePolicy().tag
            #expect(deviceTag != groupTag)
            #expect(try await answeredTag(kiosk.client) == deviceTag)
            #expect(try await answeredTag(twin.client) == groupTag)
            _ = try await server.admin.updateDevice(id: twin.id, DeviceUpdate(groups: []))
            let appOnly = try await twin.client.devicePolicy().tag
            #expect(appOnly == appTag)
            #expect(try await answeredTag(twin.client) == appOnly)
            #expect(try await server.admin.devicePolicy(id: kiosk.id).apps["kiosk"]?.sources[.pollInterval] == .device(kiosk.id))
            #expect(try await server.admin.explain(app: "kiosk", deviceID: kiosk.id).policy.policy.pollInterval == 60)
            let list = try await server.admin.policies()
            #expect(list.policies.map(\.scope) == [.app("kiosk"), .device(kiosk.id), .group("lobby")])

            // Unsetting every key removes the scope's policy.
            #expect(try await server.admin.patchPolicy(scope: .device(kiosk.id), ["pollInterval": nil]).isEmpty)
            #expect(try await server.admin.policies().policies.count == 2)

            // Refusals.
            let badValue = await refusal { try await server.admin.patchPolicy(scope: .app("kiosk"), ["pollInterval": 1]) }
            #expect(badValue?.status == 400)
            let badKey = await refusal { try await server.admin.patchPolicy(scope: .app("kiosk"), ["loglevel": "debug"]) }
            #expect(badKey?.status == 400)
            let noDevice = await refusal { try await server.admin.patchPolicy(scope: .device("d-none"), ["jitter": 1]) }
            #expect(noDevice?.status == 404)
            let badScope = try await server.raw(
                .patch, "/v1/admin/policies/team%3Aa", token: TestFleetServer.adminToken, headers: Self.mergePatch, body: "{}")
            #expect(badScope.status == 400)
            let byDevice = try await server.raw(.get, "/v1/admin/policies", token: kiosk.token)
            #expect(byDevice.status == 403)
        }
    }

    @Test("a busy server answers a long-poll at once with when to poll next (60 to 120 s) instead of holding it; it is not an error")
    func busy() async throws {
        try await TestFleetServer.with(busyLimit: 1) { server in
            try await server.putKioskMetadata()
            let first = try await server.enrollDevice()
            let second = try await server.enrollDevice()
            let known = try #require(try await first.client.settings(app: "kiosk")).revision
            let held = Task { try await first.client.settingsAnswer(app: "kiosk", knownRevision: known, wait: 30) }
            try await server.waitForWaiters(app: "kiosk")
            let started = ContinuousClock.now
            let told = try await second.client.settingsAnswer(app: "kiosk", knownRevision: known, wait: 30)
            #expect(started.duration(to: .now) < .seconds(5))
            #expect(told.document == nil)
            let nextPoll = try #require(told.nextPoll)
            #expect(nextPoll >= .seconds(60) && nextPoll <= .seconds(120))
            held.cancel()
            #expect(!server.log.events("busy").isEmpty)
        }
    }
}
