// Package svgchart writes the inline SVG line charts of tracekit's offline
// HTML pages (analyze's report, sweep's page and its comparison): one
// markup for the chart element, its title, the plot frame, the grid with
// its tick labels, the axis labels, the lines, the point markers, the
// reference marks and the legend entries, and the 1-2-5 tick step. What
// flows in is a Plot (the data range mapped onto a pixel rectangle) and
// the values to draw; what flows out is SVG text appended to a
// strings.Builder. How a chart bounds its axes and where it puts its
// legend is the caller's: the pages differ there on purpose.
//
// A Plot maps data to pixels linearly, y upwards:
//
//	X(x) = Left + (x - XMin) / (XMax - XMin) * Width
//	Y(y) = Top + Height - (y - YMin) / (YMax - YMin) * Height
package svgchart
