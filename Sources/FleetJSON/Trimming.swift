extension StringProtocol {
    /// The text without the characters of `set` at either end (`" \t"`, `"\n"`): the trim
    /// that reading a form field or a line of a system file needs, without Foundation.
    public func trimmingCharacters(in set: String) -> String {
        let characters = Set(set)
        guard let start = firstIndex(where: { !characters.contains($0) }), let end = lastIndex(where: { !characters.contains($0) }) else {
            return ""
        }
        return String(self[start...end])
    }
}
