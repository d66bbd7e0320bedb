import FleetJSON
import FleetProtocol

extension ConsolePages {
    /// What the audit page shows: entries by one account or of one action, and from which number on.
    public struct AuditFilter: Sendable {
        public var who: String?
        public var action: String?
        /// Entries numbered above this (the page after).
        public var after: Int64

        public init(who: String? = nil, action: String? = nil, after: Int64 = 0) {
            self.who = who.flatMap { $0.isEmpty ? nil : $0 }
            self.action = action.flatMap { $0.isEmpty ? nil : $0 }
            self.after = after
        }
    }

    /// How many entries one page of the audit trail shows.
    public static let auditPageSize = 100

    /// The audit trail, oldest first, a page at a time: who, which credential, from where, when,
    /// what, on what, the outcome; refusals marked.
    public static func audit(_ entries: [AuditEntry], filter: AuditFilter, csrf: String) -> HTML {
        let rows = entries.map { entry -> HTML in
            let refused = entry.status >= 400
            return """
                <tr\(flag: "class=\"refused\"", refused)><td class="num">\(entry.sequence)</td><td><time datetime="\(Timestamp.format(entry.at))">\(Timestamp.format(entry.at))</time></td>\
                <td>\(entry.actor)</td><td>\(entry.credential)</td><td>\(entry.address)</td><td><code>\(entry.action)</code></td>\
                <td>\(entry.target.isEmpty ? "-" : entry.target)</td><td>\(entry.status) \(entry.outcome)</td><td>\(entry.detail)</td></tr>
                """
        }
        var query: [String] = []
        if let who = filter.who { query.append("who=\(percentEncoded(who))") }
        if let action = filter.action { query.append("action=\(percentEncoded(action))") }
        let next: HTML =
            entries.count == auditPageSize
            ? "<p><a href=\"/console/audit?\((query + ["after=\(entries.last?.sequence ?? 0)"]).joined(separator: "&"))\">Later entries</a></p>"
            : .empty
        return ConsoleFrame.page(
            title: "Audit trail", section: .audit, csrf: csrf,
            main: """
                <h1>Audit trail</h1>
                <p>Every admin write, whatever its outcome, and every refusal, in order. Each entry is chained to the one before by its hash: <code>fleetset-server audit verify</code> on the server machine names the first one changed, removed or reordered.</p>
                <form method="get" action="/console/audit" class="filters"><label for="audit-who">Who</label><input id="audit-who" name="who" value="\(filter.who ?? "")" autocomplete="off">\
                <label for="audit-action">Action</label><input id="audit-action" name="action" value="\(filter.action ?? "")" autocomplete="off">\
                <button type="submit">Show</button></form>
                \(entries.isEmpty ? "<p>No entries.</p>" : """
                <div class="table-wrap"><table class="audit"><thead><tr><th scope="col">#</th><th scope="col">When</th><th scope="col">Who</th><th scope="col">Credential</th><th scope="col">From</th><th scope="col">Action</th><th scope="col">Target</th><th scope="col">Outcome</th><th scope="col">Detail</th></tr></thead>
                <tbody>\(HTML.joined(rows))</tbody></table></div>
                """ as HTML)
                \(next)
                """)
    }
}
