import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// The attacks of issue 13 on the device side, against the real `fleetsetd`, `fleetset` and
/// `fleetset-server`: a hostile pattern in a request file, secrets deep in values and in a
/// hook's output, a local user racing the agent's temporary files, token rotation, a changed
/// server, a lost enrollment answer, hard links, and TLS.
@Suite("Hostile input on the device")
struct HostileInputAgentTests {
    static let attack = String(repeating: "a", count: 40) + "!"

    /// An app whose writable greeting has a pattern that backtracks catastrophically.
    static func catastrophicMetadata(app: String) -> JSONValue {
        [
            "app": .string(app), "version": 1,
            "schema": [
                "type": "object", "additionalProperties": false,
                "properties": [
                    "greeting": ["type": "string", "pattern": "^(a+)+$", "default": "aaa", "x-writable": true],
                    "volume": ["type": "integer", "default": 1],
                ],
            ],
        ]
    }

    @Test("a request whose value the pattern cannot check in time is refused saying so; the loop goes on, after a restart too")
    func catastrophicPatternRequest() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        _ = try await fleet.admin.putMetadata(app: "kiosk", document: Array(Self.catastrophicMetadata(app: "kiosk").serialized().utf8))
        var agent = try await fleet.launchAgent([["id": "kiosk"]], storeMetadata: false)
        defer { agent.kill() }
        let first = try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }

        // The CLI checks first, and answers at once.
        let started = ContinuousClock.now
        let refused = try await fleet.cli(["set", "greeting=\(Self.attack)"])
        #expect(refused.status == 1 && refused.standardError.contains("too expensive to check"), "\(refused)")
        #expect(ContinuousClock.now - started < .seconds(60), "a bound: without the step budget this takes hours")

        // A request file that bypasses the CLI: the agent refuses it, with the reason.
        let inbox = fleet.layout.inboxDirectory("kiosk")
        let request: JSONValue = ["request": "set", "values": ["greeting": .string(Self.attack)]]
        try FileSystemWrite.text(request.serialized(), to: inbox + "/.attack", mode: 0o644)
        #expect(rename(inbox + "/.attack", inbox + "/attack.json") == 0)
        let journal = try await WriteBackTests.waitForJournal(fleet, "kiosk", agent: agent) { $0.lookup("attack") != .unknown }
        guard case .ended(let outcome) = journal.lookup("attack") else { return }
        #expect(outcome.state == .refused && outcome.message.contains("too expensive to check against"), "\(outcome.message)")

        // Still syncing, and again after a restart (the request is gone, not retried forever).
        try await fleet.set("kiosk", ["volume": 2])
        try await fleet.waitForSettings("kiosk", agent: agent) { $0.revision > first.revision && $0.values["volume"] == 2 }
        agent.signal(SIGTERM)
        #expect(await agent.waitForExit(timeout: .seconds(60)) == 0)
        agent = try fleet.startAgent()
        try await fleet.set("kiosk", ["volume": 3])
        try await fleet.waitForSettings("kiosk", agent: agent) { $0.values["volume"] == 3 }
        #expect(ContinuousClock.now - started < .seconds(60))
    }

    /// A list of camera streams, each with a secret password, and a secret numeric PIN inside an
    /// object setting.
    static let streamsMetadata: JSONValue = [
        "app": "cams", "version": 1,
        "schema": [
            "type": "object", "additionalProperties": false,
            "properties": [
                "streams": [
                    "type": "array", "default": [],
                    "items": [
                        "type": "object", "additionalProperties": false,
                        "properties": ["url": ["type": "string"], "password": ["type": "string", "x-secret": true]],
                    ],
                ],
                "service": [
                    "type": "object", "default": ["pin": 271_828],
                    "properties": ["pin": ["type": "integer", "x-secret": true]],
                ],
                "greeting": ["type": "string", "default": "hi"],
            ],
        ],
    ]

    @Test("secrets at any depth never reach a report, status.json, show, get or watch; the hook's output is redacted before it is cut")
    func nestedSecretsOnTheDevice() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        _ = try await fleet.admin.putMetadata(app: "cams", document: Array(Self.streamsMetadata.serialized().utf8))
        let password = "correct-horse-battery-staple"
        _ = try await fleet.admin.patchValues(
            app: "cams", scope: "app", patch: ["streams": [["url": "rtsp://cam1", "password": .string(password)]]])
        // The hook prints the secrets, then 2,040 more bytes on the same line: the 2 KiB it keeps
        // begin inside the password, so cutting before redacting would leave its end.
        let hook = fleet.directory + "/leaky-hook"
        try FileSystemWrite.text(
            "#!/bin/sh\nprintf 'pin=271828 '\nprintf '%s' '\(password)'\nhead -c 2040 /dev/zero | tr '\\\\0' 'x'\nexit 3\n", to: hook,
            mode: 0o755)
        var watch: RunningProcess?
        let agent = try await fleet.launchAgent([["id": "cams", "onChange": [.string(hook)]]], storeMetadata: false)
        defer {
            agent.kill()
            watch?.kill()
        }
        let line = try await fleet.waitForStatusLine("cams", containing: ["state=error"], agent: agent)
        #expect(line.contains("hook") && line.contains("exited with status 3") && line.contains("********"), "\(line)")
        let status = try await fleet.waitForStatus("cams", agent: agent) { $0.state == .error }
        let statusText = try String(contentsOfFile: fleet.layout.statusFile("cams"), encoding: .utf8)
        for fragment in [password, "battery-staple", "staple", "271828"] {
            #expect(!line.contains(fragment) && !statusText.contains(fragment) && !agent.log.contains(fragment), "\(fragment)")
        }
        #expect(status.lastError?.contains("********") == true)
        #expect(try AgentSyncTests.mode(fleet.layout.statusFile("cams")) == 0o640)

        let show = try await fleet.cli(["show"])
        #expect(show.status == 0 && show.standardOutput.contains("rtsp://cam1") && !show.standardOutput.contains(password), "\(show)")
        let get = try await fleet.cli(["get", "/streams/0/password"])
        #expect(get.status == 1 && get.standardError.contains("is a secret") && !get.standardOutput.contains(password))
        let holder = try await fleet.cli(["get", "streams", "--json"])
        #expect(holder.status == 1 && holder.standardError.contains("holds a secret"))
        #expect(try await fleet.cli(["get", "greeting"]).standardOutput == "hi\n")

        watch = try RunningProcess(CLIRunner.binary, ["watch", "--config", fleet.configurationFile], standardOutputToLog: true)
        // Changed only once the watcher watches (an inotify watch in its descriptors): a change
        // made before it read its starting revision would never be printed.
        let watcher = watch!.pid
        try await Waiting.until("fleetset watch never set up its inotify watch") { Self.hasInotifyWatch(pid: watcher) }
        _ = try await fleet.admin.patchValues(
            app: "cams", scope: "app", patch: ["streams": [["url": "rtsp://cam2", "password": "swordfish-0042"]], "greeting": "hello"])
        let watched = try await watch!.waitForLog("rtsp://cam2")
        #expect(!watched.contains("swordfish") && watched.contains("********"), "\(watched)")
    }

    /// Whether process `pid` has an inotify watch (`/proc/PID/fdinfo` lists each as `inotify wd:`).
    static func hasInotifyWatch(pid: Int32) -> Bool {
        let folder = "/proc/\(pid)/fdinfo"
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return descriptors.contains { descriptor in
            (try? String(contentsOfFile: folder + "/" + descriptor, encoding: .utf8))?.contains("inotify wd:") == true
        }
    }

    @Test("a local user of the agent's group racing the agent never opens a temporary settings file before it is locked down")
    func temporaryFileRace() async throws {
        guard geteuid() == 0 else {
            print("temporaryFileRace: not root, so no second real user can be made; skipped (CI runs as root)")
            return
        }
        // scripts/install-deps installs both.
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "setpriv is missing")
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"), "python3 is missing")
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        _ = try await fleet.admin.putMetadata(app: "cams", document: Array(Self.streamsMetadata.serialized().utf8))
        // Readers: nogroup. The racer: uid 65534 in the agent's own group (root's, gid 0) but not in nogroup.
        let agent = try await fleet.launchAgent([["id": "cams", "readers": "nogroup"]], storeMetadata: false)
        defer { agent.kill() }
        _ = try await fleet.waitForSettings("cams", agent: agent) { _ in true }
        let appDirectory = fleet.layout.appDirectory("cams")
        #expect(chmod(fleet.layout.stateDirectory, 0o755) == 0 && chmod(fleet.layout.stateDirectory + "/apps", 0o755) == 0)
        let racer = try RunningProcess(
            "/usr/bin/setpriv",
            ["--reuid=65534", "--regid=0", "--clear-groups", "/usr/bin/python3", "-c", Self.racer, appDirectory],
            standardOutputToLog: true)
        defer { racer.kill() }
        try await racer.waitForLog("watching")
        for round in 1...60 {
            _ = try await fleet.admin.patchValues(
                app: "cams", scope: "app", patch: ["streams": [["url": "rtsp://cam", "password": .string("secret-\(round)-xyzzy")]]])
            try await fleet.waitForSettings("cams", agent: agent) {
                $0.values["streams"]?[pointer: JSONPointer("/0/password")!] == .string("secret-\(round)-xyzzy")
            }
        }
        // A signal may be blocked in processes the test runner starts: a file tells the racer to stop.
        try FileSystemWrite.text("", to: appDirectory + "/racer-stop", mode: 0o644)
        let outcome = try await racer.waitForLog("report ")
        // The racer saw the temporary files appear (it was really racing) but could never open one.
        #expect(outcome.contains("seen="), "racer report: \(outcome)\n\(racer.log)")
        let seen = Int(outcome.split(separator: " ").first { $0.hasPrefix("seen=") }?.dropFirst(5) ?? "0") ?? 0
        #expect(seen > 0, "the racer never saw a temporary file: \(outcome)")
        #expect(outcome.contains("opened=0 leaked=0"), "racer report: \(outcome)")
    }

    /// Watches a folder with inotify and tries to open every temporary file the moment it is
    /// created, keeping what it opened to read it once written. Prints `report seen=N opened=N
    /// leaked=N` when a file named `racer-stop` appears.
    static let racer = #"""
        import ctypes, os, struct, sys
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        folder = sys.argv[1]
        fd = libc.inotify_init()
        libc.inotify_add_watch(fd, folder.encode(), 0x100)  # IN_CREATE
        seen = opened = leaked = 0
        held = []
        def finish():
            global leaked
            for f in held:
                try:
                    f.seek(0)
                    if b"xyzzy" in f.read():
                        leaked += 1
                except OSError:
                    pass
            print(f"report seen={seen} opened={opened} leaked={leaked}", flush=True)
            sys.exit(0)
        print("watching", flush=True)
        while True:
            data = os.read(fd, 65536)
            offset = 0
            while offset < len(data):
                _, _, _, length = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16: offset + 16 + length].rstrip(b"\0").decode()
                offset += 16 + length
                if name == "racer-stop":
                    finish()
                if ".tmp-" not in name:
                    continue
                seen += 1
                try:
                    held.append(open(os.path.join(folder, name), "rb"))
                    opened += 1
                except OSError:
                    pass
        """#

    @Test(
        "the admin asks for a new token: the agent rotates it, keeps it in identity.json (0600), the old one stops working, and its queue goes on"
    )
    func tokenRotation() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "kiosk"]])
        defer { agent.kill() }
        let first = try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        let before = try fleet.identity()
        let admin = ["--server", fleet.server.url, "--token-file", fleet.directory + "/admin.token"]
        let asked = try await CLIRunner.run(["admin", "devices", "set", before.deviceId, "--rotate-token"] + admin)
        #expect(asked.status == 0 && asked.standardOutput.contains("token rotation requested"), "\(asked)")
        // The next answer carries the request: an admin change wakes the long-poll.
        try await fleet.set("kiosk", ["volume": 4])
        try await agent.waitForLog("event=token-rotated")
        let after = try fleet.identity()
        #expect(after.deviceId == before.deviceId && after.deviceToken != before.deviceToken)
        #expect(try AgentSyncTests.mode(fleet.layout.identityFile) == 0o600)
        // The agent's next request uses the new token; from then on the old one is refused.
        try await fleet.set("kiosk", ["volume": 5])
        try await fleet.waitForSettings("kiosk", agent: agent) { $0.values["volume"] == 5 }
        try await fleet.server.waitForLog("event=token-rotated")
        let old = FleetClient(http: fleet.http, baseURL: fleet.server.url, token: before.deviceToken)
        do {
            _ = try await old.settings(app: "kiosk")
            Issue.record("the old token still works")
        } catch let error as FleetClientError {
            #expect(error.status == 401)
        }
        let set = try await fleet.cli(["set", "greeting=after rotation", "--wait", "--timeout", "20"])
        #expect(set.status == 0, "\(set)\n\(agent.log)")
        #expect(fleet.settings("kiosk").map { $0.revision > first.revision && $0.values["greeting"] == "after rotation" } == true)
        let shown = try await CLIRunner.run(["admin", "devices", "show", before.deviceId, "--json"] + admin)
        #expect(shown.standardOutput.contains("\"tokenRotationRequested\": false"), "\(shown)")
        #expect(!agent.log.contains(after.deviceToken) && !fleet.server.log.contains(after.deviceToken))
    }

    @Test("the configured server is not the one the device enrolled with: the token is never sent there, and the log says what to do")
    func serverChanged() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        _ = try await fleet.syncOnceAndStop([["id": "kiosk"]])
        let elsewhere = try await FaultProxy.start(upstream: fleet.server.url, http: fleet.http)
        try fleet.writeConfiguration(apps: [["id": "kiosk"]], server: elsewhere.url)
        let agent = try fleet.startAgent()
        defer { agent.kill() }
        let line = try await agent.waitForLog("event=server-mismatch")
        #expect(line.contains("enrolled_with=\(fleet.server.url)") && line.contains("remove") && line.contains("identity.json"), "\(line)")
        // That the token is never sent later either (no identity for the loops, no enrollment
        // in its place) is EnrollmentServerMismatchTests' rule, shown without waiting.
        #expect(elsewhere.authorizationsSeen.isEmpty, "\(elsewhere.authorizationsSeen)")
        #expect(fleet.settings("kiosk") != nil)  // still served from disk
    }

    @Test("an enrollment whose answer is lost is retried with the same request id: one device, although the token allows one use")
    func lostEnrollmentAnswer() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        try await fleet.putMetadata(app: "kiosk")
        let proxy = try await FaultProxy.start(upstream: fleet.server.url, http: fleet.http)
        proxy.inject(.loseEnrollAnswer)
        try await fleet.makeEnrollmentToken()  // one use
        try fleet.writeConfiguration(apps: [["id": "kiosk"]], server: proxy.url)
        let agent = try fleet.startAgent()
        defer { agent.kill() }
        try await Waiting.until("the enrollment answer was never lost") { proxy.faultsServed("loseEnrollAnswer") >= 1 }
        let request = try String(contentsOfFile: fleet.layout.enrollmentRequestFile, encoding: .utf8)
        #expect(request.contains("requestId"))
        proxy.inject(.none)
        try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        #expect(try await fleet.admin.allDevices().devices.count == 1)
        #expect(try fleet.identity().deviceId == (try await fleet.admin.allDevices().devices.first?.id))
        #expect(!FileManager.default.fileExists(atPath: fleet.layout.enrollmentRequestFile))
        #expect(!agent.log.contains("used as often as it allows"))
    }

    @Test("a hard link of an allowed writer's file is refused and never recorded as theirs; refused/ is 0700, reasons 0600")
    func hardLinksAndRefusedFolder() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "kiosk"]])
        defer { agent.kill() }
        _ = try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        let inbox = fleet.layout.inboxDirectory("kiosk")
        let original = fleet.directory + "/writers-own.json"
        try FileSystemWrite.text(#"{"request": "set", "values": {"greeting": "linked"}}"#, to: original, mode: 0o644)
        #expect(link(original, inbox + "/linked.json") == 0)
        let refused = inbox + "/refused"
        try await Waiting.until("the hard link was not moved aside:\n\(agent.log)") {
            FileManager.default.fileExists(atPath: refused + "/linked.json.reason")
        }
        #expect(try String(contentsOfFile: refused + "/linked.json.reason", encoding: .utf8).contains("has 2 hard links"))
        try await Task.sleep(for: .milliseconds(300))
        #expect((try? WriteBackTests.journal(fleet, "kiosk").lookup("linked")) ?? .unknown == .unknown)
        #expect(try AgentSyncTests.mode(refused) == 0o700)
        #expect(try AgentSyncTests.mode(refused + "/linked.json.reason") == 0o600)
        #expect(fleet.settings("kiosk")?.values["greeting"] == "hello")
    }

    @Test("TLS 1.1 is refused; with --client-ca, a device without a client certificate cannot connect, one with it syncs")
    func tlsAndClientCertificates() async throws {
        let fleet = try await Fleet.start(tls: true, clientCertificates: true)
        defer { Task { await fleet.stop() } }
        let port = String(fleet.server.port)
        let certificate = ["-cert", fleet.clientCertificateFile, "-key", fleet.clientKeyFile, "-CAfile", fleet.certificateFile]
        let old = try await CLIRunner.run(
            ["s_client", "-connect", "127.0.0.1:" + port, "-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"] + certificate,
            executable: "/usr/bin/openssl",
            input: "")
        #expect(old.status != 0, "TLS 1.1 was accepted: \(old.standardOutput)")
        let current = try await CLIRunner.run(
            ["s_client", "-connect", "127.0.0.1:" + port, "-tls1_2"] + certificate, executable: "/usr/bin/openssl", input: "")
        #expect(current.status == 0 && current.standardOutput.contains("Verify return code: 0"), "\(current.standardError)")

        try await fleet.putMetadata(app: "secure")
        try await fleet.makeEnrollmentToken()
        try fleet.writeConfiguration(apps: [["id": "secure"]], extra: ["caFile": .string(fleet.certificateFile)])
        let anonymous = try fleet.startAgent()
        defer { anonymous.kill() }
        let refused = try await anonymous.waitForLog("event=enroll-failed")
        #expect(fleet.settings("secure") == nil, "\(refused)")
        anonymous.signal(SIGTERM)
        _ = await anonymous.waitForExit(timeout: .seconds(60))

        try fleet.writeConfiguration(
            apps: [["id": "secure"]],
            extra: [
                "caFile": .string(fleet.certificateFile), "clientCertificate": .string(fleet.clientCertificateFile),
                "clientKey": .string(fleet.clientKeyFile),
            ])
        let agent = try fleet.startAgent()
        defer { agent.kill() }
        try await fleet.waitForSettings("secure", agent: agent) { _ in true }
        try await fleet.set("secure", ["counter": 3])
        try await fleet.waitForSettings("secure", agent: agent) { $0.values["counter"] == 3 }
    }

    @Test(
        "a server that ignores If-None-Match and wait: the agent keeps polling, and reports a refused revision once, also after a restart")
    func serverIgnoringConditionalRequests() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let proxy = try await FaultProxy.start(upstream: fleet.server.url, http: fleet.http)
        try await fleet.putMetadata(app: "panel")
        try await fleet.set("panel", ["volume": 8])
        try await fleet.makeEnrollmentToken()
        try fleet.writeConfiguration(apps: [["id": "panel"]], server: proxy.url, extra: ["pollInterval": 2])
        let agent = try fleet.startAgent()
        defer { agent.kill() }
        try await fleet.waitForSettings("panel", agent: agent) { $0.values["volume"] == 8 }

        // From now on every settings request is answered 200 at once; then a revision comes that
        // the agent must refuse (version 2 allows volume up to 3).
        proxy.inject(.ignoreConditionalRequests)
        try await fleet.putMetadata(app: "panel", version: 2, volumeMaximum: 3, force: true)
        let refused = try await fleet.waitForStatusLine("panel", containing: ["state=error", "schema_version=2"], agent: agent)
        let revision = try #require(refused.split(separator: " ").first { $0.hasPrefix("revision=") })

        // The agent keeps polling, and the repeated revision is not reported again. That it asks
        // at most once per pollInterval, and reports the revision once however often it comes,
        // is the sync machine's rule (SyncMachineMisbehavingServerTests.repeatedRevision, ten
        // minutes of such a server in a few milliseconds): here one more answer is enough.
        let before = proxy.faultsServed("ignoreConditionalRequests")
        try await Waiting.until("the agent stopped polling:\n\(agent.log)") {
            proxy.faultsServed("ignoreConditionalRequests") > before
        }
        let reports = fleet.statusLines("panel").filter { $0.split(separator: " ").contains(revision) && $0.contains("state=error") }
        #expect(reports.count == 1, "one report for the refused revision: \(reports)")
        #expect(agent.isRunning)

        // Restarted, the agent still knows it refused that revision: no second report.
        agent.signal(SIGTERM)
        #expect(await agent.waitForExit(timeout: .seconds(60)) == 0)
        let restarted = try fleet.startAgent()
        defer { restarted.kill() }
        let served = proxy.faultsServed("ignoreConditionalRequests")
        try await Waiting.until("the restarted agent never asked:\n\(restarted.log)") {
            proxy.faultsServed("ignoreConditionalRequests") >= served + 2
        }
        let again = fleet.statusLines("panel").filter { $0.split(separator: " ").contains(revision) && $0.contains("state=error") }
        #expect(again.count == 1, "still one report after a restart: \(again)")
    }
}
