import FleetTestSupport
import Foundation

/// Debian's Prometheus tools (`scripts/install-deps` installs `prometheus` and
/// `prometheus-alertmanager`) and the alert rules the server package ships.
///
/// As with ``TestTools``: the tests that need them run when they are there, and are skipped with
/// a message when they are not, unless `FLEETSET_REQUIRE_PYTHON_TOOLS` is set (as `scripts/test`
/// sets it): then they run, and fail for what is missing.
enum PrometheusTools {
    static let promtool = "/usr/bin/promtool"
    static let prometheus = "/usr/bin/prometheus"
    static let alertmanager = "/usr/bin/prometheus-alertmanager"
    /// The rules, as installed to `/usr/share/fleetset-server/prometheus/`.
    static let rules = TestTools.repository + "/packaging/prometheus/fleetset.rules.yml"
    /// Their `promtool test rules` file.
    static let ruleTests = TestTools.repository + "/packaging/prometheus/fleetset.rules.test.yml"

    static let promtoolPresent = TestTools.present(promtool)
    static let serversPresent = TestTools.present(prometheus, alertmanager)

    /// Throws, naming what is missing and how to install it, when one of `paths` is not there.
    static func require(_ paths: String...) throws {
        let missing = paths.filter { !FileManager.default.isExecutableFile(atPath: $0) }
        guard missing.isEmpty else {
            throw ProcessFailed(
                log:
                    "missing \(missing.joined(separator: ", ")): run scripts/install-deps (Debian's prometheus and prometheus-alertmanager)"
            )
        }
    }
}
