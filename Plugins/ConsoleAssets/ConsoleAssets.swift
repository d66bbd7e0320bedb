import Foundation
import PackagePlugin

/// Embeds the console's stylesheet and script (`Sources/FleetConsole/Assets/console.css` and
/// `console.js`, hand-written files a linter and a person can read) in the server binary as
/// Swift string literals, so that `fleetset-server` serves its console with nothing installed
/// beside it. Editing either file regenerates the source.
@main
struct ConsoleAssets: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let assets = target.directoryURL.appending(path: "Assets")
        let stylesheet = assets.appending(path: "console.css")
        let script = assets.appending(path: "console.js")
        let output = context.pluginWorkDirectoryURL.appending(path: "ConsoleAssetTexts.swift")
        let generator = ###"""
            for file in "$1" "$2"; do
                if grep -q '"""##' "$file"; then echo "$file: must not contain the text \"\"\"## (it ends the embedded literal)" >&2; exit 1; fi
            done
            {
                printf '%s\n' '// Generated from Assets/console.css and Assets/console.js by the ConsoleAssets plugin; do not edit.' \
                    'enum ConsoleAssetTexts {' '    static let stylesheet = ##"""'
                cat "$1"
                printf '\n%s\n%s\n' '"""##' '    static let script = ##"""'
                cat "$2"
                printf '\n%s\n%s\n' '"""##' '}'
            } > "$3.tmp" && mv "$3.tmp" "$3"
            """###
        return [
            .buildCommand(
                displayName: "Embedding the console's stylesheet and script",
                executable: URL(filePath: "/bin/sh"),
                arguments: [
                    "-c", generator, "sh", stylesheet.path(percentEncoded: false), script.path(percentEncoded: false),
                    output.path(percentEncoded: false),
                ],
                inputFiles: [stylesheet, script],
                outputFiles: [output])
        ]
    }
}
