"""The deployment's settings: those that decide where its data lives,
stored in Redis by its first writer and checked by every other process,
one package:

- ``layout``: which settings those are (:data:`~webtier.deployment.layout.LAYOUT`),
  their text form and how two sets differ (pure);
- ``ops``: storing, reading, adopting and resetting them: I/O-free generators;
- ``aio``: the ``tier.deployment`` part; ``sync``: its sync twin, generated
  from ``aio``.

The CLI follows the stored settings (:mod:`webtier.cli.deployment`); see
docs/deployment-settings.md.
"""
