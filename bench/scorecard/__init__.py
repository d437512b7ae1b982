"""The resume-cache scorecard: edit scenarios, two baseline keyings, and the score."""
