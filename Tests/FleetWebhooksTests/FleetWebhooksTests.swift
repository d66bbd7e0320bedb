import ChildProcess
import FleetJSON
import FleetTestSupport
import FleetWebhooks
import Foundation
import Testing

@Suite struct WebhookSignatureTests {
    /// The Standard Webhooks specification's own example.
    let specSecret = WebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")!
    let specBody = Array(#"{"test": 2432232314}"#.utf8)

    @Test func signsTheSpecificationsExample() {
        let signature = WebhookSignature.sign(
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: specBody, secret: specSecret)
        #expect(signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    @Test func verifiesOnlyTheRightSecretBodyAndTime() {
        let header = WebhookSignature.header(id: "msg_1", timestamp: 1000, body: specBody, secrets: [specSecret])
        #expect(WebhookSignature.verify(header: header, id: "msg_1", timestamp: 1000, body: specBody, secret: specSecret, now: 1000))
        #expect(WebhookSignature.verify(header: header, id: "msg_1", timestamp: 1000, body: specBody, secret: specSecret, now: 1300))
        // Older or newer than 5 minutes: refused, though the signature is right.
        #expect(!WebhookSignature.verify(header: header, id: "msg_1", timestamp: 1000, body: specBody, secret: specSecret, now: 1301))
        #expect(!WebhookSignature.verify(header: header, id: "msg_1", timestamp: 1000, body: specBody, secret: specSecret, now: 699))
        #expect(!WebhookSignature.verify(header: header, id: "msg_2", timestamp: 1000, body: specBody, secret: specSecret, now: 1000))
        #expect(!WebhookSignature.verify(header: header, id: "msg_1", timestamp: 1001, body: specBody, secret: specSecret, now: 1000))
        #expect(
            !WebhookSignature.verify(header: header, id: "msg_1", timestamp: 1000, body: specBody + [0x20], secret: specSecret, now: 1000))
        #expect(!WebhookSignature.verify(header: header, id: "msg_1", timestamp: 1000, body: specBody, secret: .generate(), now: 1000))
        #expect(
            !WebhookSignature.verify(
                header: "v2," + header.dropFirst(3), id: "msg_1", timestamp: 1000, body: specBody, secret: specSecret, now: 1000))
    }

    @Test func aRotatedSecretsMessageCarriesBothSignatures() {
        let old = WebhookSecret.generate()
        let new = WebhookSecret.generate()
        let header = WebhookSignature.header(id: "msg_9", timestamp: 50, body: specBody, secrets: [new, old])
        #expect(header.split(separator: " ").count == 2)
        for secret in [old, new] {
            #expect(WebhookSignature.verify(header: header, id: "msg_9", timestamp: 50, body: specBody, secret: secret, now: 60))
        }
    }

    @Test func secretsAreWhsecAndTwentyFourToSixtyFourOctets() {
        let secret = WebhookSecret.generate()
        #expect(secret.key.count == 32)
        #expect(secret.text.hasPrefix("whsec_"))
        #expect(WebhookSecret(secret.text) == secret)
        #expect(WebhookSecret.generate() != secret)
        #expect(!"\(secret)".contains(secret.text.dropFirst(6)))
        var dumped = ""
        dump(secret, to: &dumped)
        #expect(dumped.contains("redacted") && !dumped.contains("key"), "\(dumped)")
        #expect(WebhookSecret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") == nil)  // no prefix
        #expect(WebhookSecret("whsec_" + Data(repeating: 1, count: 23).base64EncodedString()) == nil)
        #expect(WebhookSecret("whsec_" + Data(repeating: 1, count: 24).base64EncodedString()) != nil)
        #expect(WebhookSecret("whsec_" + Data(repeating: 1, count: 64).base64EncodedString()) != nil)
        #expect(WebhookSecret("whsec_" + Data(repeating: 1, count: 65).base64EncodedString()) == nil)
        #expect(WebhookSecret("whsec_not base64!") == nil)
    }

    @Test func aMessagesBodyAndHeaders() throws {
        let message = WebhookMessage(
            id: "msg_42", type: "rollout.paused", occurredAt: 1_700_000_000, data: .object(["app": .string("kiosk")]))
        let body = String(decoding: message.body, as: UTF8.self)
        #expect(body == #"{"type":"rollout.paused","timestamp":"2023-11-14T22:13:20Z","data":{"app":"kiosk"}}"#)
        let secret = WebhookSecret.generate()
        let headers = Dictionary(uniqueKeysWithValues: message.headers(now: 1_700_000_100, secrets: [secret]).map { ($0.name, $0.value) })
        #expect(headers["webhook-id"] == "msg_42")
        #expect(headers["webhook-timestamp"] == "1700000100")
        #expect(headers["content-type"] == "application/json")
        let signature = try #require(headers["webhook-signature"])
        #expect(
            WebhookSignature.verify(
                header: signature, id: "msg_42", timestamp: 1_700_000_100, body: message.body, secret: secret, now: 1_700_000_100))
    }

    /// The reference library checks what fleetset signs, and fleetset checks what it signs.
    @Test(.enabled(if: TestTools.present(TestTools.python) || TestTools.required))
    func theReferenceLibraryAgrees() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("webhooks-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let message = WebhookMessage(
            id: "msg_7", type: "device.error", occurredAt: 1_700_000_000, data: .object(["count": .number(.integer(3))]))
        try Data(message.body).write(to: URL(fileURLWithPath: folder + "/body"))
        let secret = WebhookSecret.generate()
        let now = Int64(Date().timeIntervalSince1970)
        let script = TestTools.repository + "/Tests/FleetWebhooksTests/Scripts/standard_webhooks.py"
        let header = WebhookSignature.header(id: "msg_7", timestamp: now, body: message.body, secrets: [WebhookSecret.generate(), secret])
        let verified = try await ChildProcess.run(
            [TestTools.python, script, "verify", secret.text, "msg_7", String(now), folder + "/body", header], environment: [],
            timeout: .seconds(30))
        #expect(verified.output.contains("verified"), "\(verified.output)")
        // A signature under another secret: the library refuses it.
        let forged = WebhookSignature.header(id: "msg_7", timestamp: now, body: message.body, secrets: [WebhookSecret.generate()])
        let refused = try await ChildProcess.run(
            [TestTools.python, script, "verify", secret.text, "msg_7", String(now), folder + "/body", forged], environment: [],
            timeout: .seconds(30))
        #expect(!refused.output.contains("verified") && refused.termination != .exited(0))
        let signed = try await ChildProcess.run(
            [TestTools.python, script, "sign", secret.text, "msg_7", String(now), folder + "/body"], environment: [], timeout: .seconds(30))
        let signature = signed.output.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(
            WebhookSignature.verify(header: signature, id: "msg_7", timestamp: now, body: message.body, secret: secret, now: now),
            "\(signed.output)")
    }
}

@Suite struct DeliveryScheduleTests {
    @Test func waitsGrowThenRepeatForADayThenTheMessageIsDead() {
        let schedule = DeliverySchedule.standard
        var now: Int64 = 1000
        var attempts = 1
        var waits: [Int64] = []
        while let next = schedule.nextAttempt(afterFailedAttempts: attempts, firstAttemptAt: 1000, now: now, fraction: 0.5) {
            waits.append(next - now)
            now = next
            attempts += 1
        }
        #expect(waits == [5, 30, 120, 600, 1800, 3600, 7200, 14_400, 14_400, 14_400, 14_400, 14_400])
        #expect(attempts == 13)
        #expect(now - 1000 <= 24 * 3600)
    }

    @Test func jitterMovesAWaitByAtMostAFifth() {
        let schedule = DeliverySchedule.standard
        #expect(schedule.nextAttempt(afterFailedAttempts: 4, firstAttemptAt: 0, now: 0, fraction: 0) == 480)
        #expect(schedule.nextAttempt(afterFailedAttempts: 4, firstAttemptAt: 0, now: 0, fraction: 1) == 720)
        #expect(schedule.nextAttempt(afterFailedAttempts: 4, firstAttemptAt: 0, now: 0, fraction: 7) == 720)
        #expect(schedule.nextAttempt(afterFailedAttempts: 1, firstAttemptAt: 0, now: 86_000, fraction: 0.5) == 86_005)
        #expect(schedule.nextAttempt(afterFailedAttempts: 1, firstAttemptAt: 0, now: 86_396, fraction: 0.5) == nil)
    }
}

@Suite struct DestinationPolicyTests {
    let policy = DestinationPolicy()

    @Test func urlsAreHTTPSOrLoopbackHTTP() throws {
        let https = try policy.check(url: "https://hooks.example.com/fleet?x=1")
        #expect(https.host == "hooks.example.com" && https.port == 443 && !https.isLoopbackHost)
        let loopback = try policy.check(url: "http://127.0.0.1:8080/in")
        #expect(loopback.port == 8080 && loopback.isLoopbackHost)
        #expect(try policy.check(url: "http://[::1]:9/").isLoopbackHost)
        #expect(try policy.check(url: "http://localhost/").isLoopbackHost)
        for (url, reason) in [
            ("http://hooks.example.com/", "https://"), ("ftp://x.example/", "https://"), ("https://user:pw@x.example/", "user name"),
            ("https://x.example/#a", "fragment"), ("https://x.example:0/", "port"), ("https://x.example:70000/", "port"),
            ("https:///path", "no host"), ("https://[::1/", "closing"), ("https://[zz]/", "IPv6"), ("https://x.example/a b", "printable"),
            ("http://10.0.0.1/", "https://"),
        ] {
            #expect(throws: DestinationPolicy.Refused.self, "\(url)") { try policy.check(url: url) }
            do {
                _ = try policy.check(url: url)
            } catch {
                #expect(error.reason.contains(reason), "\(url): \(error.reason)")
            }
        }
    }

    @Test func resolvedAddressesAreChecked() throws {
        let public_ = try policy.check(url: "https://hooks.example.com/")
        for address in ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "172.32.0.1", "100.128.0.1"] {
            #expect(throws: Never.self, "\(address)") { try policy.check(address: address, for: public_) }
        }
        for address in [
            "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.1.1", "100.64.0.1", "0.0.0.0", "224.0.0.1",
            "255.255.255.255", "fc00::1", "fd12::1", "fe80::1", "ff02::1", "::", "::ffff:10.0.0.1", "64:ff9b::a00:1", "127.0.0.1",
            "::1", "::ffff:127.0.0.1", "169.254.169.254", "fd00:ec2::254",
        ] {
            #expect(throws: DestinationPolicy.Refused.self, "\(address)") { try policy.check(address: address, for: public_) }
        }
        let permissive = DestinationPolicy(allowPrivate: true)
        for address in ["10.1.2.3", "192.168.1.1", "fd12::1", "fe80::1"] {
            #expect(throws: Never.self, "\(address)") { try permissive.check(address: address, for: public_) }
        }
        // Never the metadata address, never this machine (loopback for a name that is not
        // loopback, the unspecified addresses, which reach it too), never their IPv6 forms.
        for address in [
            "169.254.169.254", "fd00:ec2::254", "127.0.0.1", "::1", "0.0.0.0", "::", "::ffff:0.0.0.0", "::7f00:1", "2002:7f00:1::1",
            "2002:a9fe:a9fe::1",
        ] {
            #expect(throws: DestinationPolicy.Refused.self, "\(address)") { try permissive.check(address: address, for: public_) }
        }
        for address in ["fec0::1", "64:ff9b:1::a00:1", "::a00:1", "2002:c0a8:101::1"] {
            #expect(throws: DestinationPolicy.Refused.self, "\(address)") { try policy.check(address: address, for: public_) }
        }
        let loopback = try policy.check(url: "http://localhost:9000/")
        #expect(throws: Never.self) { try policy.check(address: "127.0.0.1", for: loopback) }
        #expect(throws: Never.self) { try policy.check(address: "::1", for: loopback) }
        // http:// goes only to this machine: a *.localhost name that resolves elsewhere is refused.
        let named = try policy.check(url: "http://hooks.localhost/")
        #expect(named.isLoopbackHost && named.isPlainHTTP)
        #expect(throws: DestinationPolicy.Refused.self) { try policy.check(address: "93.184.216.34", for: named) }
        #expect(throws: DestinationPolicy.Refused.self) { try permissive.check(address: "10.0.0.1", for: named) }
        let secure = try policy.check(url: "https://hooks.localhost/")
        #expect(throws: Never.self) { try policy.check(address: "93.184.216.34", for: secure) }
        #expect(throws: DestinationPolicy.Refused.self) { try policy.check(address: "not-an-address", for: loopback) }
    }
}
