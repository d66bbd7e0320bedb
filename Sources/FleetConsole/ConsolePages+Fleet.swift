import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetServerCore

extension ConsolePages {
    // MARK: - Metadata

    /// What the metadata page shows after "Preview": the differences and what would break.
    public struct MetadataReview: Sendable {
        public let document: String
        public let preview: MetadataPreview?
        /// Why the document could not be read (the 400/422 details), when it could not.
        public let problems: [ErrorBody.Detail]
        public let message: String?

        public init(document: String, preview: MetadataPreview?, problems: [ErrorBody.Detail] = [], message: String? = nil) {
            self.document = document
            self.preview = preview
            self.problems = problems
            self.message = message
        }
    }

    /// The current metadata, and the upload form with its preview.
    public static func metadata(app: String, current: Metadata?, review: MetadataReview?, csrf: String, notice: HTML? = nil) -> HTML {
        let currentText = current.map { $0.document.serialized(.pretty) } ?? ""
        let uploadText = review?.document ?? currentText
        var reviewHTML = HTML.empty
        if let review {
            reviewHTML = metadataReview(review, current: current, app: app, csrf: csrf)
        }
        return ConsoleFrame.page(
            title: "\(app) metadata", section: .apps, csrf: csrf,
            main: """
                <h1>\(app) <span class="muted">metadata</span></h1>
                \(appTabs(app, current: "metadata"))
                \(notice)
                <p>Stored version: <strong>\(current.map { "\($0.version)" } ?? "none")</strong>.</p>
                \(reviewHTML)
                <form method="post" action="/console/apps/\(app)/metadata" class="metadata-upload">
                <input type="hidden" name="csrf" value="\(csrf)">
                <label for="metadata-file">Load a file</label> <input type="file" id="metadata-file" accept="application/json,.json" data-load-into="metadata-document">
                <label for="metadata-document">New metadata document (JSON)</label>
                <textarea id="metadata-document" name="document" rows="18" spellcheck="false" class="json" required>\(uploadText)</textarea>
                <div class="actions"><button type="submit" name="action" value="preview" class="primary">Preview the change</button></div>
                </form>
                """)
    }

    private static func metadataReview(_ review: MetadataReview, current: Metadata?, app: String, csrf: String) -> HTML {
        if let message = review.message {
            let problems = review.problems.map { problem -> HTML in "<li><code>\(problem.pointer)</code>: \(problem.message)</li>" }
            return """
                <section class="review" aria-labelledby="review-title"><h2 id="review-title">The document cannot be stored</h2>
                \(ConsoleFrame.notice(message, error: true))<ul>\(HTML.joined(problems))</ul></section>
                """
        }
        guard let preview = review.preview else { return .empty }
        let differences = MetadataDifference.between(current, preview.proposed).map { difference -> HTML in
            "<li>\(difference.html)</li>"
        }
        let breaks = preview.breaks.map { detail -> HTML in "<tr><td><code>\(detail.pointer)</code></td><td>\(detail.message)</td></tr>" }
        let breakHTML: HTML =
            preview.breaks.isEmpty
            ? "<p class=\"notice\">No stored value breaks under the new version.</p>"
            : """
            <h3>Stored values the new version refuses</h3>
            <div class="table-wrap"><table class="breaks"><thead><tr><th scope="col">Value</th><th scope="col">Why, and for which devices</th></tr></thead><tbody>\(HTML.joined(breaks))</tbody></table></div>
            <p>Storing it anyway (force) makes these devices report <code>error</code> until the values are changed.</p>
            """
        let store: HTML
        if let problem = preview.versionProblem {
            store = ConsoleFrame.notice("It cannot be stored: \(problem). Raise its version.", error: true)
        } else {
            let force = !preview.breaks.isEmpty
            store = """
                <form method="post" action="/console/apps/\(app)/metadata" class="metadata-store">
                <input type="hidden" name="csrf" value="\(csrf)"><input type="hidden" name="document" value="\(review.document)">
                \(force ? "<input type=\"hidden\" name=\"force\" value=\"true\">" as HTML : .empty)
                <button type="submit" name="action" value="store" class="\(force ? "danger" : "primary")">\(force ? "Store anyway (force)" : "Store version \(preview.proposed.version)")</button>
                </form>
                """
        }
        return """
            <section class="review" aria-labelledby="review-title"><h2 id="review-title">Version \(preview.proposed.version) against \(current.map { "version \($0.version)" } ?? "nothing stored")</h2>
            <ul class="differences">\(differences.isEmpty ? "<li>No difference in settings or layout.</li>" : HTML.joined(differences))</ul>
            \(breakHTML)\(store)</section>
            """
    }

    // MARK: - Devices

    /// The devices list's filters.
    public struct DeviceFilter: Sendable, Hashable {
        public var group: String?
        public var app: String?
        /// A ``RolloutState`` raw value, or `disabled`.
        public var state: String?
        /// `5m`, `1h`, `1d` (seen within) or `old` (not seen for a day).
        public var seen: String?
        /// The page of the list, from 1.
        public var page: Int

        public init(group: String? = nil, app: String? = nil, state: String? = nil, seen: String? = nil, page: Int = 1) {
            self.page = page
            self.group = group.flatMap { $0.isEmpty ? nil : $0 }
            self.app = app.flatMap { $0.isEmpty ? nil : $0 }
            self.state = state.flatMap { $0.isEmpty ? nil : $0 }
            self.seen = seen.flatMap { $0.isEmpty ? nil : $0 }
        }

        /// Whether `device` passes every filter.
        public func admits(_ device: Device, standings: [String: DeviceAppStanding], now: Int64) -> Bool {
            if let group, !device.groups.contains(group) { return false }
            if let app, !device.apps.contains(app) { return false }
            if let state {
                if state == "disabled" {
                    if !device.disabled { return false }
                } else {
                    let relevant = app.map { standings[$0].map { [$0] } ?? [] } ?? Array(standings.values)
                    if !relevant.contains(where: { $0.state.rawValue == state }) { return false }
                }
            }
            if let seen {
                let age = device.lastSeenAt.map { now - $0 } ?? .max
                switch seen {
                case "5m": if age > 300 { return false }
                case "1h": if age > 3600 { return false }
                case "1d": if age > 86_400 { return false }
                case "old": if age <= 86_400 { return false }
                default: break
                }
            }
            return true
        }
    }

    /// What else a report says (``FleetProtocol/StatusReport/Detail``), as a note after its
    /// state: ` (restored after a local edit)`; empty without one.
    static func detailNote(_ report: StatusReport) -> HTML {
        switch report.detail {
        case .restoredAfterLocalEdit?:
            " <span class=\"detail\" data-detail=\"restored-after-local-edit\">(restored after a local edit)</span>"
        case nil: .empty
        }
    }

    /// The devices that pass `filter`, with their latest report per app.
    public static func devices(_ overview: FleetOverview, filter: DeviceFilter, now: Int64, csrf: String) -> HTML {
        let shown = overview.devices.filter { filter.admits($0, standings: overview.standings[$0.id] ?? [:], now: now) }
        let groups = Set(overview.devices.flatMap(\.groups)).sorted()
        let pages = max(1, (shown.count + Self.devicesPerPage - 1) / Self.devicesPerPage)
        let page = min(max(1, filter.page), pages)
        let first = (page - 1) * Self.devicesPerPage
        let onPage = shown[first..<min(first + Self.devicesPerPage, shown.count)]
        let rows = onPage.map { device -> HTML in
            let standings = overview.standings[device.id] ?? [:]
            let apps = device.apps.map { app -> HTML in
                guard let standing = standings[app] else { return "<li>\(app): <span class=\"muted\">no metadata</span></li>" }
                let report = standing.latest.map { latest -> HTML in
                    "\(detailNote(latest.report)) <span class=\"muted\">r\(latest.report.revision)\(latest.report.message.isEmpty ? "" : ": " + latest.report.message)</span>"
                }
                return "<li>\(app): \(stateBadge(standing.state))\(report)</li>"
            }
            return """
                <tr data-device="\(device.id)"><th scope="row"><a href="/console/devices/\(device.id)">\(device.id)</a>\(device.disabled ? " <span class=\"state state-error\">disabled</span>" as HTML : .empty)</th>\
                <td>\(device.groups.joined(separator: ", "))</td><td><ul class="plain">\(HTML.joined(apps))</ul></td><td>\(ConsoleFrame.time(device.lastSeenAt, now: now))</td></tr>
                """
        }
        func select(_ name: String, _ label: String, _ options: [(String, String)], _ current: String?) -> HTML {
            let choices = ([("", "any")] + options).map { value, title -> HTML in
                "<option value=\"\(value)\"\(flag: "selected", value == (current ?? ""))>\(title)</option>"
            }
            return
                "<div class=\"filter\"><label for=\"filter-\(name)\">\(label)</label><select id=\"filter-\(name)\" name=\"\(name)\">\(HTML.joined(choices))</select></div>"
        }
        let states = RolloutState.allCases.map { ($0.rawValue, label($0)) } + [("disabled", "disabled")]
        let seen = [("5m", "in the last 5 minutes"), ("1h", "in the last hour"), ("1d", "in the last day"), ("old", "not for a day")]
        return ConsoleFrame.page(
            title: "Devices", section: .devices, csrf: csrf, live: true,
            main: """
                <h1>Devices</h1>
                <form method="get" action="/console/devices" class="filters">
                \(select("group", "Group", groups.map { ($0, $0) }, filter.group))\(select("app", "App", overview.apps.map { ($0.app, $0.app) }, filter.app))\
                \(select("state", "State", states, filter.state))\(select("seen", "Last seen", seen, filter.seen))
                <button type="submit">Filter</button></form>
                <div data-live-region="devices">
                <p role="status">\(shown.count) of \(overview.devices.count) devices\(pages > 1 ? ", \(first + 1)–\(first + onPage.count) shown" : "").</p>
                \(pageLinks(filter, page: page, pages: pages))
                <div class="table-wrap"><table class="devices"><thead><tr><th scope="col">Device</th><th scope="col">Groups</th><th scope="col">Apps: latest report</th><th scope="col">Last seen</th></tr></thead>
                <tbody>\(HTML.joined(rows))</tbody></table></div>
                \(pageLinks(filter, page: page, pages: pages))</div>
                """)
    }

    /// Devices per page of the Devices list (a page of a large fleet stays small for a tablet).
    public static let devicesPerPage = 200

    /// Previous and next links that keep the filters.
    private static func pageLinks(_ filter: DeviceFilter, page: Int, pages: Int) -> HTML {
        guard pages > 1 else { return .empty }
        func link(_ target: Int, _ title: String, _ rel: String) -> HTML {
            var query = [("group", filter.group), ("app", filter.app), ("state", filter.state), ("seen", filter.seen)].compactMap {
                name, value in
                value.map { "\(name)=\(percentEncoded($0))" }
            }
            query.append("page=\(target)")
            return "<a href=\"/console/devices?\(query.joined(separator: "&"))\" rel=\"\(rel)\">\(title)</a>"
        }
        return """
            <nav class="pages" aria-label="Pages of devices">\(page > 1 ? link(page - 1, "Previous page", "prev") : .empty) \
            <span>page \(page) of \(pages)</span> \(page < pages ? link(page + 1, "Next page", "next") : .empty)</nav>
            """
    }

    /// One device: its groups and apps, each app's explanation and latest report, and the
    /// disable and delete buttons.
    public static func device(
        _ device: Device, standings: [String: DeviceAppStanding], explanations: [String: ScopeValuesExplanation],
        recentReports: [StatusRecord], facts: StoredDeviceInfo? = nil, policy: DevicePolicy = DevicePolicy(), now: Int64, csrf: String,
        notice: HTML? = nil
    ) -> HTML {
        let factRows = DeviceInfo.facts(facts?.info ?? [:]).map { fact -> HTML in
            "<tr><th scope=\"row\"><code>\(fact.name)</code></th><td>\(fact.value)</td></tr>"
        }
        let changed: HTML = facts.map { stored -> HTML in ", last changed \(ConsoleFrame.time(stored.updatedAt, now: now))" } ?? .empty
        let factsHTML: HTML =
            factRows.isEmpty
            ? "<p>It has not reported its facts yet.</p>"
            : """
            <div class="table-wrap"><table class="facts-table"><caption>As it reported them\(changed)</caption>
            <thead><tr><th scope="col">Fact</th><th scope="col">Value</th></tr></thead><tbody>\(HTML.joined(factRows))</tbody></table></div>
            """
        let policyRows = policy.apps.keys.sorted().flatMap { app -> [HTML] in
            let resolved = policy.apps[app]!
            return AgentPolicy.Key.allCases.compactMap { key -> HTML? in
                guard let value = resolved.policy[key] else { return nil }
                return """
                    <tr><td>\(app)</td><th scope="row"><code>\(key.rawValue)</code></th><td>\(value.stringValue ?? value.serialized())</td>\
                    <td>\(resolved.sources[key]?.description ?? "-")</td></tr>
                    """
            }
        }
        let policyHTML: HTML =
            policyRows.isEmpty
            ? "<p>No agent policy reaches it: its agent follows its own configuration file.</p>"
            : """
            <div class="table-wrap"><table class="policy"><caption>What the server asks of its agent (a key its configuration file sets wins)</caption>
            <thead><tr><th scope="col">App</th><th scope="col">Key</th><th scope="col">Value</th><th scope="col">Set at</th></tr></thead><tbody>\(HTML.joined(policyRows))</tbody></table></div>
            """
        let reportRows = recentReports.map { record -> HTML in
            let report = record.report
            return """
                <tr><td>\(ConsoleFrame.time(record.time, now: now))</td><td>\(record.app)</td><td class="num">\(report.revision)</td>\
                <td><span class="state state-\(report.state == .applied ? "applied" : report.state.rawValue)">\(report.state.rawValue)</span></td>\
                <td>\(report.source.rawValue)</td><td>\(report.message)</td></tr>
                """
        }
        let recent: HTML =
            recentReports.isEmpty
            ? "<p>No report yet.</p>"
            : """
            <div class="table-wrap"><table class="reports"><caption>Its reports of the last \(Int(StatusHistory.revisions)) revisions of each app, newest first</caption>
            <thead><tr><th scope="col">Received</th><th scope="col">App</th><th scope="col">Revision</th><th scope="col">State</th><th scope="col">From</th><th scope="col">Message</th></tr></thead>
            <tbody>\(HTML.joined(reportRows))</tbody></table></div>
            """
        let withMetadata = device.apps.filter { explanations[$0] != nil }
        let withoutMetadata = device.apps.filter { explanations[$0] == nil }
        let apps = withMetadata.map { app -> HTML in
            let standing = standings[app]
            let report: HTML =
                standing?.latest.map { latest in
                    """
                    <p>Latest report: \(latest.report.state.rawValue)\(detailNote(latest.report)) for revision \(latest.report.revision) from the \(latest.report.source.rawValue), \
                    \(ConsoleFrame.time(latest.receivedAt, now: now))\(latest.report.message.isEmpty ? "" : ": " + latest.report.message)</p>
                    """
                } ?? "<p>No report yet.</p>"
            let rows = (explanations[app]?.rows ?? []).map { row -> HTML in
                "<tr><th scope=\"row\"><code>\(row.key)</code></th><td><code>\(row.value)</code></td><td>\(row.source)</td></tr>"
            }
            return """
                <section class="device-app" aria-labelledby="app-\(app)"><h2 id="app-\(app)">\(app) \(standing.map { stateBadge($0.state) })</h2>
                <p>Served revision: \(standing?.servedRevision.map { "\($0)" } ?? "none yet")\(standing?.servedIsNewest == false ? " (not the newest)" : ""). \
                <a href="/console/apps/\(app)?scope=device:\(percentEncoded(device.id))">Edit its values at device scope</a></p>
                \(report)
                <div class="table-wrap"><table class="explain"><caption>Effective settings, and the scope that set each</caption>
                <thead><tr><th scope="col">Setting</th><th scope="col">Value</th><th scope="col">Set by</th></tr></thead><tbody>\(HTML.joined(rows))</tbody></table></div>
                </section>
                """
        }
        return ConsoleFrame.page(
            title: device.id, section: .devices, csrf: csrf, live: true,
            main: """
                <h1>Device \(device.id)\(device.disabled ? " <span class=\"state state-error\">disabled</span>" as HTML : .empty)</h1>
                \(notice)
                <dl class="facts"><dt>Groups</dt><dd>\(device.groups.isEmpty ? "none" : device.groups.joined(separator: ", "))</dd>\
                <dt>Apps</dt><dd>\(device.apps.joined(separator: ", "))</dd><dt>Enrolled</dt><dd>\(ConsoleFrame.time(device.enrolledAt, now: now))</dd>\
                <dt>Last seen</dt><dd>\(ConsoleFrame.time(device.lastSeenAt, now: now))</dd>\
                \(withoutMetadata.isEmpty ? .empty : "<dt>Apps without metadata yet</dt><dd>\(withoutMetadata.joined(separator: ", "))</dd>" as HTML)</dl>
                <div data-live-region="device">\(HTML.joined(apps))
                <section aria-labelledby="device-facts"><h2 id="device-facts">What it says of itself</h2>\(factsHTML)</section>
                <section aria-labelledby="agent-policy"><h2 id="agent-policy">Agent policy</h2>\(policyHTML)</section>
                <section aria-labelledby="recent-reports"><h2 id="recent-reports">Recent reports</h2>\(recent)</section></div>
                <section class="danger-zone" aria-labelledby="manage"><h2 id="manage">Manage</h2>
                <form method="post" action="/console/devices/\(device.id)/\(device.disabled ? "enable" : "disable")"><input type="hidden" name="csrf" value="\(csrf)">\
                <button type="submit">\(device.disabled ? "Enable" : "Disable") this device</button> <span class="help">\(device.disabled ? "Its token works again." : "Its token is refused until it is enabled again.")</span></form>
                <form method="post" action="/console/devices/\(device.id)/delete"><input type="hidden" name="csrf" value="\(csrf)">\
                <label><input type="checkbox" name="confirm" value="yes" required> Delete \(device.id): its token stops working and its device-scope values go</label> \
                <button type="submit" class="danger">Delete this device</button></form></section>
                """)
    }

    // MARK: - Enrollment tokens

    /// The enrollment tokens, the form that makes one, and a new token shown once.
    public static func tokens(
        _ tokens: EnrollmentTokenList, apps: [String], created: EnrollmentTokenResponse?, now: Int64, csrf: String, notice: HTML? = nil
    ) -> HTML {
        let createdHTML: HTML =
            created.map { created in
                """
                <section class="created" aria-labelledby="created-title"><h2 id="created-title">New enrollment token \(created.id)</h2>
                <p>It is shown this once; the server keeps only its hash. Put it in the device's enrollment token file.</p>
                <label for="new-token">Enrollment token</label>
                <div class="copy"><input type="text" id="new-token" readonly value="\(created.enrollmentToken)" class="token" aria-label="Enrollment token"> <button type="button" data-copy="new-token" hidden>Copy</button></div></section>
                """
            } ?? .empty
        let appChoices = apps.map { app -> HTML in
            "<label class=\"check\"><input type=\"checkbox\" name=\"apps\" value=\"\(app)\"> \(app)</label>"
        }
        let rows = tokens.tokens.map { token -> HTML in
            """
            <tr data-token="\(token.id)"><th scope="row"><code>\(token.id)</code></th><td>\(token.apps.joined(separator: ", "))</td><td>\(token.groups.joined(separator: ", "))</td>\
            <td class="num">\(token.usesLeft)</td><td><time datetime="\(Timestamp.format(token.expiresAt))">\(Timestamp.format(token.expiresAt))</time></td>\
            <td><form method="post" action="/console/tokens/\(token.id)/revoke"><input type="hidden" name="csrf" value="\(csrf)"><button type="submit" class="danger" aria-label="Revoke \(token.id)">Revoke</button></form></td></tr>
            """
        }
        let expiries = [("3600", "1 hour"), ("86400", "1 day"), ("604800", "7 days"), ("2592000", "30 days")]
        let expiryOptions = expiries.map { value, title -> HTML in
            "<option value=\"\(value)\"\(flag: "selected", value == "86400")>\(title)</option>"
        }
        return ConsoleFrame.page(
            title: "Enrollment tokens", section: .tokens, csrf: csrf,
            main: """
                <h1>Enrollment tokens</h1>
                \(notice)\(createdHTML)
                <section aria-labelledby="make-title"><h2 id="make-title">Make a token</h2>
                <form method="post" action="/console/tokens" class="make-token"><input type="hidden" name="csrf" value="\(csrf)">
                <fieldset><legend>Apps its devices get</legend>\(apps.isEmpty ? "<p>No app has metadata yet.</p>" : HTML.joined(appChoices))</fieldset>
                <label for="token-groups">Groups (comma-separated)</label><input id="token-groups" name="groups" autocomplete="off">
                <label for="token-uses">Devices it may enroll</label><input id="token-uses" name="uses" type="number" min="1" max="100000" step="1" value="1" required>
                <label for="token-expiry">Valid for</label><select id="token-expiry" name="expiresIn">\(HTML.joined(expiryOptions))</select>
                <div class="actions"><button type="submit" class="primary">Make the token</button></div></form></section>
                <section aria-labelledby="tokens-title"><h2 id="tokens-title">Tokens that can still enroll</h2>
                \(tokens.tokens.isEmpty ? "<p>None.</p>" : """
                <div class="table-wrap"><table class="tokens"><thead><tr><th scope="col">Id</th><th scope="col">Apps</th><th scope="col">Groups</th><th scope="col">Uses left</th><th scope="col">Expires</th><th scope="col"><span class="visually-hidden">Revoke</span></th></tr></thead>
                <tbody>\(HTML.joined(rows))</tbody></table></div>
                """ as HTML)</section>
                """)
    }
}

/// A device's effective settings for one app as rows for a table, secrets masked.
public struct ScopeValuesExplanation: Sendable {
    public struct Row: Sendable {
        public let key: String
        public let value: String
        public let source: String
    }

    public let rows: [Row]

    public init(_ explanation: Explanation) {
        rows = explanation.rows.map { row in
            Row(key: row.key, value: row.value.map(SettingsForm.short) ?? "-", source: row.source)
        }
    }
}
