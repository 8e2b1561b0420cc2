"""Human-readable reports: Markdown and one self-contained HTML file."""
