import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// Power cuts and crashes: `kill -9` at random moments of apply cycles.
@Suite("fleetsetd survives kill -9")
struct CrashTests {
    static let cycles = 200

    @Test("after kill -9 at random moments of 200 apply cycles, settings.json is always valid and a revision the server served")
    func killNineDuringApplies() async throws {
        // 200 restarts in seconds, and the test's own reads with the device's token, are far
        // beyond what a device may send: the per-device limit is raised for this test.
        let fleet = try await Fleet.start(serverArguments: ["--device-rate", "10000", "--device-burst", "10000"])
        defer { Task { await fleet.stop() } }
        let metadata = try Metadata(Fleet.metadata(app: "crash", version: 1))
        var agent = try await fleet.launchAgent([["id": "crash"]])
        defer { agent.kill() }
        let first = try await fleet.waitForSettings("crash", agent: agent) { _ in true }
        let device = try fleet.deviceClient()
        var served: [Int64: JSONObject] = [first.revision: first.values]
        var random = SystemRandomNumberGenerator()
        var newest = 0
        var older = 0

        for cycle in 1...Self.cycles {
            // Half the time the agent is caught up and long-polling when the change comes;
            // otherwise it is still starting from the last kill.
            if Bool.random(using: &random), let latest = served.keys.max() {
                try await fleet.waitForSettings("crash", agent: agent) { $0.revision == latest }
            }
            try await fleet.set("crash", ["counter": .number(.integer(Int64(cycle)))])
            let document = try #require(try await device.settings(app: "crash"))
            served[document.revision] = document.values
            try await Task.sleep(for: .microseconds(UInt32.random(in: 0...25_000, using: &random)))
            agent.signal(SIGKILL)
            _ = await agent.waitForExit()

            let file = fleet.layout.settingsFile("crash")
            let onDisk = try #require(SettingsOnDisk.load(file, app: "crash").settings, "cycle \(cycle): no settings")
            #expect(SettingsOnDisk.load(file, app: "crash").source == .current, "cycle \(cycle): settings.json itself must be intact")
            #expect(
                served[onDisk.revision] == onDisk.values, "cycle \(cycle): revision \(onDisk.revision) was never served with these values")
            #expect(metadata.validate(values: .object(onDisk.values)).isEmpty, "cycle \(cycle)")
            if onDisk.revision == document.revision { newest += 1 } else { older += 1 }
            agent = try fleet.startAgent()
        }
        print("kill -9 over \(Self.cycles) cycles: \(newest) ended with the new revision on disk, \(older) with an older one")
        #expect(newest > 0 && older > 0, "the kills should land both before and after the write")

        // The last agent finishes: the newest revision applied, its outcome settled and reported.
        let latest = try #require(served.keys.max())
        try await fleet.waitForSettings("crash", agent: agent) { $0.revision == latest }
        try await fleet.waitForStatus("crash", agent: agent) { $0.revision == latest && $0.state == .applied }
        try await fleet.waitForStatusLine("crash", containing: ["revision=\(latest)", "state=applied"], agent: agent)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: fleet.layout.appDirectory("crash")).filter {
            $0.contains(".tmp-")
        }
        #expect(leftovers.isEmpty, "temporary files of interrupted writes are cleaned up at start: \(leftovers)")
    }
}
