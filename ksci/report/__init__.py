"""What a run shows a person: the HTML report, the text summaries."""
