"""What every decision's outputs are written with: number formats, SVG pieces, the agreement matrix, the CSV."""
