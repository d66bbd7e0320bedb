import FleetProtocol

/// How an identity provider's group claim becomes a role and a scope: rules such as
/// `fleet-admins=admin` or `kiosk-devs=editor:apps=kiosk,menu:groups=lobby`, given with
/// `--oidc-role` (one per rule) or one per line of a file.
///
/// A person in several mapped groups gets the highest role among them (owner, admin, editor,
/// operator, viewer, auditor) and, when that role is scoped, its rules' scopes joined where
/// that grants nothing more than they do (see ``grant(groups:)``). A person in none is refused.
public struct RoleMapping: Sendable, Hashable {
    /// One rule: a group, the role it grants, and the scope (for scoped roles).
    public struct Rule: Sendable, Hashable {
        public var group: String
        public var role: Role
        public var scope: AccountScope

        public init(group: String, role: Role, scope: AccountScope = .everything) {
            self.group = group
            self.role = role
            self.scope = scope
        }
    }

    /// What was wrong with a rule's text, and where.
    public struct Invalid: Error, Sendable, Hashable, CustomStringConvertible {
        public let rule: String
        public let reason: String
        public var description: String { "the role rule \"\(rule)\" \(reason)" }
    }

    public var rules: [Rule]

    public init(rules: [Rule]) { self.rules = rules }

    /// Reads rules written as `GROUP=ROLE[:apps=A,B][:groups=G,H]`; empty lines and lines
    /// starting with `#` are skipped (a file's comments).
    ///
    /// - Throws: ``Invalid`` naming the first rule that cannot be read, and why.
    public init(parsing texts: [String]) throws(Invalid) {
        var rules: [Rule] = []
        for raw in texts {
            // A file written on Windows ends its lines with \r: not part of a rule.
            let text = String(String(String.UnicodeScalarView(raw.unicodeScalars.filter { $0 != "\r" }))[...].trimmingSpaces())
            guard !text.isEmpty, !text.hasPrefix("#") else { continue }
            rules.append(try Self.rule(text))
        }
        self.rules = rules
    }

    private static func rule(_ text: String) throws(Invalid) -> Rule {
        guard let equals = text.firstIndex(of: "="), equals != text.startIndex else {
            throw Invalid(rule: text, reason: "needs GROUP=ROLE, e.g. fleet-admins=admin")
        }
        let group = String(text[..<equals])
        let parts = text[text.index(after: equals)...].split(separator: ":", omittingEmptySubsequences: false)
        guard let roleText = parts.first, let role = Role(rawValue: String(roleText)) else {
            let known = Role.allCases.map(\.rawValue).joined(separator: ", ")
            throw Invalid(rule: text, reason: "names no role (one of \(known))")
        }
        var scope = AccountScope.everything
        for part in parts.dropFirst() {
            let pair = part.split(separator: "=", maxSplits: 1)
            let names = pair.count == 2 ? pair[1].split(separator: ",").map(String.init).filter { !$0.isEmpty } : []
            switch (pair.first.map(String.init), names.isEmpty) {
            case ("apps", false): scope.apps += names
            case ("groups", false): scope.groups += names
            default: throw Invalid(rule: text, reason: "has \"\(part)\" where apps=A,B or groups=G,H belongs")
            }
        }
        guard role != .editor || !scope.apps.isEmpty else {
            throw Invalid(rule: text, reason: "gives editor no apps (an editor is scoped to apps: editor:apps=A,B)")
        }
        guard role.isScoped || scope.isEverything else {
            throw Invalid(rule: text, reason: "gives a scope to \(role.rawValue), which always has the whole fleet")
        }
        return Rule(group: group, role: role, scope: scope)
    }

    /// The role and scope the groups of a person grant; `nil` when no rule matches.
    public func grant(groups: [String]) -> (role: Role, scope: AccountScope)? {
        let matching = rules.filter { groups.contains($0.group) }
        guard let role = Self.ranking.first(where: { role in matching.contains { $0.role == role } }) else { return nil }
        let granting = matching.filter { $0.role == role }
        guard role.isScoped, !granting.contains(where: { $0.scope.isEverything }) else { return (role, .everything) }
        // An account's scope is its apps across its groups: rules that differ in both cannot be
        // joined without granting what neither does (kiosk in lobby and menu in office are not
        // kiosk and menu in lobby and office). Those that share their groups, or their apps, are
        // joined; otherwise the first rule in the configured order stands.
        let first = granting[0].scope
        if granting.allSatisfy({ Set($0.scope.groups) == Set(first.groups) }) {
            return (role, AccountScope(apps: Self.union(granting.map(\.scope.apps)), groups: first.groups))
        }
        if granting.allSatisfy({ Set($0.scope.apps) == Set(first.apps) }) {
            return (role, AccountScope(apps: first.apps, groups: Self.union(granting.map(\.scope.groups))))
        }
        return (role, first)
    }

    /// The names in any of `lists`; an empty list means every one, and so does the union with it.
    private static func union(_ lists: [[String]]) -> [String] {
        guard !lists.contains(where: \.isEmpty) else { return [] }
        var seen: [String] = []
        for name in lists.joined() where !seen.contains(name) { seen.append(name) }
        return seen
    }

    /// The roles from the most to the least powerful.
    static let ranking: [Role] = [.owner, .admin, .editor, .operator, .viewer, .auditor]
}
