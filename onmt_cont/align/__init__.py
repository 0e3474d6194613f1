"""Word alignment for build_lexicon.py: fast_align's model (:mod:`.fast_align`), symmetrisation
(:mod:`.symmetrise`) and the Pharaoh format (:mod:`.pharaoh`).

Direction naming: "forward" here means each *source* word picks a target word or NULL
(the source word is generated), which is what a source->target lexicon needs; "reverse"
trains the other way. (fast_align's own default direction is the opposite one.)
Alignments are lists of ``(source_position, target_position)`` pairs, 0-based, sorted.
"""

Alignment = list[tuple[int, int]]
