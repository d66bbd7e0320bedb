import FleetDeviceState
import FleetIO
import FleetJSON
import FleetTestSupport
import Foundation
import Testing

@testable import FleetAgent

/// Item 6 of issue 34: a hook runs with the agent's rights, so the agent runs only a program
/// that root or its own user controls, and gives it a minimal environment.
@Suite("fleetsetd runs only hooks it can trust, with a minimal environment")
struct HookTrustTests {
    /// Writes an executable script at `path` that saves its environment to `marker`.
    static func writeHook(_ path: String, marker: String) throws {
        try Data("#!/bin/sh\nenv > \(marker)\n".utf8).write(to: URL(fileURLWithPath: path))
    }

    static func chmod(_ path: String, _ mode: mode_t) throws {
        guard Foundation.chmod(path, mode) == 0 else { throw CocoaError(.fileWriteNoPermission, userInfo: ["path": path]) }
    }

    @Test(
        "a group-writable hook, or one in a world-writable folder, is not run: error naming the path; a hook in a 0755 folder runs with only PATH, the locale and FLEETSET_*"
    )
    func untrustedHooksAreNotRun() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        // fleet.directory is a root-owned 0755 folder in /tmp (root's, sticky): a trusted chain.
        try Self.chmod(fleet.directory, 0o755)
        let hooks = fleet.directory + "/hooks"
        let trusted = hooks + "/trusted", shared = hooks + "/shared"
        for folder in [trusted, shared] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        try Self.chmod(hooks, 0o755)
        try Self.chmod(trusted, 0o755)
        try Self.chmod(shared, 0o777)
        let good = trusted + "/reload", groupWritable = trusted + "/group-writable", inShared = shared + "/reload"
        func marker(_ name: String) -> String { fleet.directory + "/ran-" + name }
        try Self.writeHook(good, marker: marker("good"))
        try Self.writeHook(groupWritable, marker: marker("group-writable"))
        try Self.writeHook(inShared, marker: marker("shared"))
        try Self.chmod(good, 0o755)
        try Self.chmod(groupWritable, 0o775)
        try Self.chmod(inShared, 0o755)

        // App ids from Fleet.testApps (the enrollment token grants those): ok, gate, lobby.
        let agent = try await fleet.launchAgent(
            [
                ["id": "ok", "onChange": [.string(good)]],
                ["id": "gate", "onChange": [.string(groupWritable)]],
                ["id": "lobby", "onChange": [.string(inShared)]],
            ],
            environment: [
                "FLEETSET_TEST_LEAK": "1", "INVOCATION_ID": "0123456789abcdef",
                "CREDENTIALS_DIRECTORY": "/run/credentials/fleetsetd.service", "https_proxy": "http://user:secret@proxy.invalid:3128",
                "LANG": "C.UTF-8", "LC_TIME": "C",
            ])
        defer { agent.kill() }

        let rule =
            "a hook runs with the agent's rights, so it and every directory above it must be owned by root and writable by no one else"
        let groupLine = try await fleet.waitForStatusLine("gate", containing: ["state=error"], agent: agent)
        #expect(
            groupLine.contains("hook \(groupWritable): \(groupWritable) is writable by group root (gid 0) (mode 0775)"), "\(groupLine)")
        #expect(groupLine.contains(rule), "\(groupLine)")
        let sharedLine = try await fleet.waitForStatusLine("lobby", containing: ["state=error"], agent: agent)
        #expect(
            sharedLine.contains("hook \(inShared): \(shared) is writable by group root (gid 0) and others (mode 0777)"), "\(sharedLine)")
        for app in ["gate", "lobby"] {
            let status = try await fleet.waitForStatus(app, agent: agent) { $0.state == .error }
            #expect(status.lastError?.contains(rule) == true, "\(status.json.serialized())")
            #expect(fleet.settings(app) != nil, "the settings of \(app) are written even though its hook was refused")
        }
        // The agent reported only once the hook would have finished: had it run, it would have written its marker.
        #expect(!FileManager.default.fileExists(atPath: marker("group-writable")))
        #expect(!FileManager.default.fileExists(atPath: marker("shared")))
        let logged = agent.log.split(separator: "\n").filter { $0.contains("event=hook") && $0.contains("level=error") }
        #expect(logged.contains { $0.contains(groupWritable) } && logged.contains { $0.contains(shared) }, "\(agent.log)")

        try await fleet.waitForStatusLine("ok", containing: ["state=applied"], agent: agent)
        try await Waiting.until("the trusted hook never ran") {
            (try? String(contentsOfFile: marker("good"), encoding: .utf8))?.contains("FLEETSET_APP=ok") == true
        }
        let environment = Set(try String(contentsOfFile: marker("good"), encoding: .utf8).split(separator: "\n").map(String.init))
        #expect(environment.contains("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"))
        #expect(environment.contains("LANG=C.UTF-8") && environment.contains("LC_TIME=C"))
        for variable in ["FLEETSET_TEST_LEAK", "INVOCATION_ID", "CREDENTIALS_DIRECTORY", "https_proxy", "NOTIFY_SOCKET", "HOME"] {
            #expect(!environment.contains { $0.hasPrefix(variable + "=") }, "\(variable) leaked into the hook: \(environment.sorted())")
        }
        // What a shell adds by itself (PWD, SHLVL, _) aside, nothing but PATH, the locale and FLEETSET_*.
        let unexpected = environment.filter { variable in
            !["PATH=", "LANG=", "LC_", "FLEETSET_", "PWD=", "SHLVL=", "_="].contains { variable.hasPrefix($0) }
        }
        #expect(unexpected.isEmpty, "\(unexpected.sorted())")
        #expect(agent.isRunning)
    }

    @Test("a script given to an interpreter is checked as the program is; arguments that are not files are not")
    func scriptArguments() throws {
        let directory = try CLIRunner.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Self.chmod(directory, 0o755)
        let shared = directory + "/shared", trusted = directory + "/trusted"
        for folder in [shared, trusted] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        try Self.chmod(shared, 0o777)
        try Self.chmod(trusted, 0o755)
        for script in [shared + "/reload.sh", trusted + "/reload.sh"] {
            try Data("#!/bin/sh\n".utf8).write(to: URL(fileURLWithPath: script))
            try Self.chmod(script, 0o644)
        }
        let owners = TrustedOwners.rootAndEffectiveUser()
        let refused = Hook.refusal(of: ["/bin/sh", shared + "/reload.sh"], trusting: owners)
        #expect(refused?.hasPrefix("hook \(shared)/reload.sh: \(shared) is writable by") == true, "\(refused ?? "run")")
        #expect(Hook.refusal(of: ["/bin/sh", trusted + "/reload.sh", "--now", "/no/such/file"], trusting: owners) == nil)
    }

    @Test("the hook's environment: PATH, the agent's LANG and LC_* only, and the FLEETSET_* variables")
    func environment() {
        let locale = Hook.localeVariables(in: [
            "LANG=de_DE.UTF-8", "LC_ALL=C", "LC_TIME=en_GB.UTF-8", "LANGUAGE=de", "NOTIFY_SOCKET=/run/systemd/notify",
            "CREDENTIALS_DIRECTORY=/run/credentials/x", "LC", "HOME=/var/lib/fleetset", "PATH=/home/bob/bin:/usr/bin",
        ])
        #expect(locale == ["LANG=de_DE.UTF-8", "LC_ALL=C", "LC_TIME=en_GB.UTF-8"])
        let settings = DeviceSettings(app: "kiosk", schemaVersion: 2, revision: 7, syncedAt: 0, values: [:])
        #expect(
            Hook.environment(for: settings, settingsFile: "/var/lib/fleetset/apps/kiosk/settings.json", locale: locale) == [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=de_DE.UTF-8", "LC_ALL=C", "LC_TIME=en_GB.UTF-8",
                "FLEETSET_APP=kiosk", "FLEETSET_REVISION=7", "FLEETSET_SCHEMA_VERSION=2",
                "FLEETSET_SETTINGS_FILE=/var/lib/fleetset/apps/kiosk/settings.json",
            ])
    }
}
