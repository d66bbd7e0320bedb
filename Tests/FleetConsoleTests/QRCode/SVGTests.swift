import FleetConsole
import Testing

@Suite("SVG rendering")
struct SVGTests {
    let totp =
        "otpauth://totp/fleetset:alice.smith?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=fleetset&algorithm=SHA1&digits=6&period=30"

    @Test("The root element carries namespace, viewBox, size and accessibility attributes")
    func rootElementAttributes() throws {
        let code = try QRCode(totp)
        let svg = code.svg(moduleSize: 3, quietZone: 4, accessibilityLabel: "Scan with your authenticator")
        let side = code.size + 8
        #expect(
            svg.hasPrefix(
                "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(side) \(side)\" width=\"\(side * 3)\" height=\"\(side * 3)\" role=\"img\" aria-label=\"Scan with your authenticator\">"
            ))
        #expect(svg.hasSuffix("</svg>\n"))
    }

    @Test("One path on a white rect, crisp edges, presentation attributes only (no style)")
    func strictCSPFriendlyMarkup() throws {
        let svg = try QRCode(totp).svg()
        #expect(occurrences(of: "<path", in: svg) == 1)
        #expect(occurrences(of: "<rect", in: svg) == 1)
        #expect(svg.contains("fill=\"#ffffff\""))
        #expect(svg.contains("fill=\"#000000\""))
        #expect(svg.contains("shape-rendering=\"crispEdges\""))
        #expect(!svg.contains("style"))
        #expect(!svg.contains("<script"))
    }

    @Test("The accessibility label is XML-escaped")
    func labelIsEscaped() throws {
        let svg = try QRCode("x").svg(accessibilityLabel: "a<b & \"c\" 'd'>")
        #expect(svg.contains("aria-label=\"a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;\""))
    }

    @Test("The path redraws exactly the dark modules, as maximal horizontal runs", arguments: [0, 1, 4])
    func pathMatchesModules(quietZone: Int) throws {
        let code = try QRCode(totp, correction: .high)
        let runs = try pathRuns(code.svg(quietZone: quietZone))
        var drawn = Set<[Int]>()
        for run in runs {
            for x in run.x..<run.x + run.length {
                let (inserted, _) = drawn.insert([x - quietZone, run.y - quietZone])
                #expect(inserted, "module drawn twice at \(x), \(run.y)")
            }
            // Maximal: the modules just before and after a run are light.
            #expect(!code.isDark(x: run.x - quietZone - 1, y: run.y - quietZone))
            #expect(!code.isDark(x: run.x - quietZone + run.length, y: run.y - quietZone))
        }
        var dark = Set<[Int]>()
        for y in 0..<code.size {
            for x in 0..<code.size where code.isDark(x: x, y: y) { dark.insert([x, y]) }
        }
        #expect(drawn == dark)
    }

    private struct Run { let x: Int, y: Int, length: Int }

    /// Parses `d` made of `M{x} {y}h{n}v1h-{n}z` commands.
    private func pathRuns(_ svg: String) throws -> [Run] {
        let afterD = try #require(svg.split(separator: " d=\"", maxSplits: 1).last)
        let data = try #require(afterD.split(separator: "\"", maxSplits: 1).first)
        return try data.split(separator: "M").map { command in
            // "4 4h7v1h-7z" → ["4", "4", "7", "1", "-7"]
            let parts = command.split(whereSeparator: { " hvz".contains($0) }).map(String.init)
            try #require(parts.count == 5 && parts[3] == "1" && parts[4] == "-" + parts[2], "bad command M\(command)")
            return Run(x: try #require(Int(parts[0])), y: try #require(Int(parts[1])), length: try #require(Int(parts[2])))
        }
    }

    private func occurrences(of needle: String, in text: String) -> Int {
        text.split(separator: needle, omittingEmptySubsequences: false).count - 1
    }
}
