#!/usr/bin/env python3
"""Decodes every *.svg in a directory with two independent QR code readers.

Usage: decode_svgs.py DIRECTORY

Each SVG is rasterised with rsvg-convert (Debian librsvg2-bin), and the PNG is
read by zbarimg (Debian zbar-tools) and by zxing-cpp (PyPI zxing-cpp, with
pillow). One tab-separated line is printed per file, in file name order:

    name  zbar-bytes-hex  zxing-bytes-hex  zxing-version  zxing-level  zxing-mask

A reader that finds nothing prints "-" in its column. When a tool is missing
the script exits with status 2 and names the package that provides it.
"""
import os
import shutil
import subprocess
import sys


def fail(message):
    print("decode_svgs.py: " + message, file=sys.stderr)
    sys.exit(2)


def require_tools():
    for tool, package in [("rsvg-convert", "Debian package librsvg2-bin"),
                          ("zbarimg", "Debian package zbar-tools")]:
        if shutil.which(tool) is None:
            fail("%s not found; install the %s (apt-get install -y %s)" % (tool, package, package.split()[-1]))
    try:
        import zxingcpp  # noqa: F401
        from PIL import Image  # noqa: F401
    except ImportError as error:
        fail("%s; install PyPI packages zxing-cpp and pillow into %s (pip install zxing-cpp pillow)"
             % (error, sys.executable))


def rasterise(svg_path):
    png_path = svg_path[:-4] + ".png"
    subprocess.run(["rsvg-convert", "--background-color=white", "-o", png_path, svg_path], check=True)
    return png_path


def read_with_zbar(png_path):
    result = subprocess.run(
        ["zbarimg", "--quiet", "--raw", "--nodbus", "-Sdisable", "-Sqrcode.enable", "-Sbinary", png_path],
        capture_output=True)
    if result.returncode != 0 or not result.stdout:
        return "-"
    data = result.stdout
    return data[:-1].hex() if data.endswith(b"\n") else data.hex()


def read_with_zxing(png_path):
    import zxingcpp
    from PIL import Image
    results = zxingcpp.read_barcodes(Image.open(png_path).convert("L"), formats=zxingcpp.BarcodeFormat.QRCode)
    if not results:
        return ["-", "-", "-", "-"]
    symbol = results[0]
    extra = symbol.extra if isinstance(symbol.extra, dict) else {}
    return [symbol.bytes.hex() or "",
            str(extra.get("Version", "-")), str(extra.get("ECLevel", symbol.ec_level)),
            str(extra.get("DataMask", "-"))]


def main():
    if len(sys.argv) != 2:
        fail("usage: decode_svgs.py DIRECTORY")
    require_tools()
    directory = sys.argv[1]
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".svg"):
            continue
        png_path = rasterise(os.path.join(directory, name))
        columns = [name[:-4], read_with_zbar(png_path) or ""] + read_with_zxing(png_path)
        print("\t".join(columns))


if __name__ == "__main__":
    main()
