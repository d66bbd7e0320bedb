import FleetJSON
import FleetProtocol

extension ConsolePages {
    /// Every group: how devices come to be in it (by hand, or the query that takes them in as
    /// their facts say) and how many are in it, each linking to its page.
    public static func groups(_ list: GroupList, csrf: String) -> HTML {
        let rows = list.groups.map { group -> HTML in
            """
            <tr><th scope="row"><a href="/console/groups/\(percentEncoded(group.name))">\(group.name)</a></th>\
            <td>\(origin(group.conditions))</td><td class="num">\(group.members)</td></tr>
            """
        }
        return ConsoleFrame.page(
            title: "Groups", section: .groups, csrf: csrf,
            main: """
                <h1>Groups</h1>
                <p>A device is in a group by hand (its enrollment token, <code>fleetset admin devices set --group</code>) or by a query on \
                what it reports of itself (<code>fleetset admin groups define NAME --where FACT=VALUE</code>): it moves in or out as soon as its facts change. \
                Where several of a device's groups set a value, the later group by name wins.</p>
                \(list.groups.isEmpty ? "<p>No device is in a group, and no group is defined by a query.</p>" : """
                <div class="table-wrap"><table><thead><tr><th scope="col">Group</th><th scope="col">Defined by</th><th scope="col">Members</th></tr></thead>
                <tbody>\(HTML.joined(rows))</tbody></table></div>
                """ as HTML)
                """)
    }

    /// One group: its query (or that its devices were put in it by hand) and its members.
    public static func group(_ detail: GroupDetail, csrf: String) -> HTML {
        let name = detail.summary.name
        let members = detail.devices.map { id -> HTML in "<li><a href=\"/console/devices/\(percentEncoded(id))\">\(id)</a></li>" }
        return ConsoleFrame.page(
            title: "Group \(name)", section: .groups, csrf: csrf,
            main: """
                <h1>Group <code>\(name)</code></h1>
                <p>Defined \(origin(detail.summary.conditions)). \(detail.summary.members) device\(detail.summary.members == 1 ? "" : "s") in it.</p>
                \(members.isEmpty ? "<p>No device is in it now.</p>" : "<ul class=\"members\">\(HTML.joined(members))</ul>" as HTML)
                """)
    }

    /// `by the query <code>…</code>`, or `by hand`.
    static func origin(_ conditions: [DeviceInfoFilter]?) -> HTML {
        guard let conditions else { return "by hand" }
        return "by the query <code>\(conditions.map(\.description).joined(separator: " "))</code>"
    }
}
