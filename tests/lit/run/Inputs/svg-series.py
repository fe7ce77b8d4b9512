"""Parses an SVG (a malformed one fails here) and prints, per polyline,
its data-series name and the number of points it joins."""
import sys
import xml.dom.minidom

svg = xml.dom.minidom.parse(sys.argv[1]).documentElement
assert svg.tagName == "svg", svg.tagName
for line in svg.getElementsByTagName("polyline"):
    print(line.getAttribute("data-series"),
          len(line.getAttribute("points").split()))
for text in svg.getElementsByTagName("text"):
    if text.firstChild and text.firstChild.data.startswith("Training loss"):
        print("title:", text.firstChild.data)
