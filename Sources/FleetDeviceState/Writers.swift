/// Who may leave requests in an app's inbox, looked up: the owner of a request file must be
/// root, the agent's own user, one of `users`, or the file's group one of `groups` (a user can
/// give a file only a group they belong to).
public struct Writers: Sendable, Equatable {
    /// The allowed users, by name and id.
    public var users: [String: UInt32]
    /// The allowed groups, by name and id.
    public var groups: [String: UInt32]

    /// Creates a policy (root and the agent's user are always allowed).
    public init(users: [String: UInt32] = [:], groups: [String: UInt32] = [:]) {
        self.users = users
        self.groups = groups
    }

    /// Whether a file owned by `owner` and `group` may be a request, for an agent running as `agentUser`.
    public func allow(owner: UInt32, group: UInt32, agentUser: UInt32) -> Bool {
        owner == 0 || owner == agentUser || users.values.contains(owner) || groups.values.contains(group)
    }

    /// Who is allowed, for messages: `root, the agent's user, users kiosk, groups operators`.
    public var summary: String {
        var parts = ["root", "the agent's user"]
        if !users.isEmpty { parts.append("users " + users.keys.sorted().joined(separator: ", ")) }
        if !groups.isEmpty { parts.append("groups " + groups.keys.sorted().joined(separator: ", ")) }
        return parts.joined(separator: ", ")
    }
}
