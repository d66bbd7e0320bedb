extension StringProtocol {
    /// The text without the characters of `set` at either end (`" \t"`, `"\r\n"`): the trim
    /// that reading a form field or a line of a system file needs, without Foundation. It goes
    /// by Unicode scalars, so a `"\r\n"` (one `Character`) at an end goes when `set` has
    /// `"\r"` and `"\n"`.
    package func trimmingCharacters(in set: String) -> String {
        let trimmed = Set(set.unicodeScalars)
        let scalars = unicodeScalars
        guard let start = scalars.firstIndex(where: { !trimmed.contains($0) }),
            let end = scalars.lastIndex(where: { !trimmed.contains($0) })
        else { return "" }
        return String(String.UnicodeScalarView(scalars[start...end]))
    }
}
