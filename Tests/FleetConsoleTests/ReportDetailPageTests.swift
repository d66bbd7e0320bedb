import FleetProtocol
import FleetServerCore
import Testing

@testable import FleetConsole

@Suite("A report's detail in the console")
struct ReportDetailPageTests {
    @Test("a report's detail is shown beside its state: a settings.json put back after a hand edit")
    func reportDetail() {
        let device = Device(id: "d-1", tokenHash: "h", apps: ["kiosk"], groups: [], enrolledAt: 0, lastSeenAt: 100)
        func overview(_ detail: StatusReport.Detail?) -> FleetOverview {
            let report = StatusReport(revision: 7, schemaVersion: 1, state: .applied, source: .agent, detail: detail)
            let standing = DeviceAppStanding(
                app: "kiosk", servedRevision: 7, servedIsNewest: true, latest: DeviceStatus(report: report, receivedAt: 90),
                state: .applied)
            return FleetOverview(apps: [], devices: [device], standings: ["d-1": ["kiosk": standing]], metadata: [:])
        }
        let restored = ConsolePages.devices(overview(.restoredAfterLocalEdit), filter: .init(), now: 100, csrf: "t").text
        #expect(restored.contains(#"<span class="detail" data-detail="restored-after-local-edit">(restored after a local edit)</span>"#))
        let plain = ConsolePages.devices(overview(nil), filter: .init(), now: 100, csrf: "t").text
        #expect(!plain.contains("data-detail"))
    }
}
