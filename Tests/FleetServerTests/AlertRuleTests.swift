import FleetTestSupport
import Foundation
import Testing

/// The alert rules the server package ships (`packaging/prometheus/fleetset.rules.yml`), checked
/// and unit-tested with Debian's promtool: each alert fires where it should and stays quiet
/// where it should not. Without promtool the tests are skipped, saying so, unless
/// `FLEETSET_REQUIRE_PYTHON_TOOLS` is set (`scripts/test`): then they fail.
@Suite("Alert rules")
struct AlertRuleTests {
    /// The alerts issue 38 asks for.
    static let alerts = [
        "FleetsetRolloutPaused", "FleetsetErrorShareHigh", "FleetsetDevicesSilent", "FleetsetWebhookDeadLetters", "FleetsetShedding",
        "FleetsetDown",
    ]

    @Test("promtool is there when the test command requires it")
    func toolsInstalled() {
        if !PrometheusTools.promtoolPresent && !TestTools.required {
            print("AlertRuleTests: skipped — run scripts/install-deps to install Debian's prometheus (promtool)")
        }
        #expect(
            PrometheusTools.promtoolPresent || !TestTools.required,
            "FLEETSET_REQUIRE_PYTHON_TOOLS is set but \(PrometheusTools.promtool) is missing")
    }

    @Test(
        "promtool check rules: the packaged rules are valid, one per alert",
        .enabled(if: PrometheusTools.promtoolPresent || TestTools.required))
    func checkRules() async throws {
        try PrometheusTools.require(PrometheusTools.promtool)
        let result = try await CLIRunner.run(["check", "rules", PrometheusTools.rules], executable: PrometheusTools.promtool)
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardOutput.contains("SUCCESS: \(Self.alerts.count) rules found"), "\(result.standardOutput)")
    }

    @Test(
        "promtool test rules: each alert fires past its threshold and its for, and not below, before, elsewhere or twice",
        .enabled(if: PrometheusTools.promtoolPresent || TestTools.required))
    func testRules() async throws {
        try PrometheusTools.require(PrometheusTools.promtool)
        let result = try await CLIRunner.run(["test", "rules", PrometheusTools.ruleTests], executable: PrometheusTools.promtool)
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardOutput.contains("SUCCESS"), "\(result.standardOutput)")
    }

    @Test("every alert is in the rules with a severity, and the rule tests see each one fire and each one stay quiet")
    func everyAlertTested() throws {
        let rules = try String(contentsOfFile: PrometheusTools.rules, encoding: .utf8)
        let defined = rules.split(separator: "\n").compactMap { line in
            line.trimmingCharacters(in: .whitespaces).wholeMatch(of: /- alert: (\w+)/).map { String($0.1) }
        }
        #expect(defined == Self.alerts)
        #expect(rules.components(separatedBy: "severity: ").count - 1 == Self.alerts.count)
        // Each `alertname:` line of the tests, and whether the `exp_alerts` after it is empty.
        let lines = try String(contentsOfFile: PrometheusTools.ruleTests, encoding: .utf8).split(separator: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }
        var quiet: Set<String> = []
        var firing: Set<String> = []
        for (index, line) in lines.enumerated() {
            guard let name = line.wholeMatch(of: /alertname: (\w+)/).map({ String($0.1) }), index + 1 < lines.count else { continue }
            if lines[index + 1] == "exp_alerts: []" { quiet.insert(name) } else if lines[index + 1] == "exp_alerts:" { firing.insert(name) }
        }
        #expect(firing == Set(Self.alerts), "alerts never seen firing: \(Set(Self.alerts).subtracting(firing).sorted())")
        #expect(quiet == Set(Self.alerts), "alerts never seen quiet: \(Set(Self.alerts).subtracting(quiet).sorted())")
    }
}
