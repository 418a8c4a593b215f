"""The ``--prices`` and ``--priced-as`` options of ``taskctx inspect`` and ``taskctx report``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

__all__ = ["PricedAsOpt", "PricesOpt", "price_options"]

PricesOpt = Annotated[
    str | None,
    typer.Option("--prices", metavar="FILE", help="Prices (USD per 1M tokens) over the list prices: TOML or JSON."),
]
PricedAsOpt = Annotated[
    str | None,
    typer.Option("--priced-as", metavar="MODEL", help="Price every call as this model (e.g. an offline run)."),
]


def price_options(prices: str | None, priced_as: str | None) -> dict[str, Any]:
    """The price table of ``--prices`` and ``--priced-as``, checked before anything is read.

    Args:
        prices: ``--prices``: a TOML or JSON price file over the list prices, or None.
        priced_as: ``--priced-as``: the model every call is priced as, or None.

    Returns:
        The table (model name -> :class:`nodes.prices.ModelPrice`), to pass as ``prices=``.

    Raises:
        InvalidInputError: The file is not a price table, or ``priced_as`` has no price in it
            (the message names the model and the known ones).
    """
    from ..costs import check_priced_as, resolve_prices

    table = resolve_prices(prices)
    check_priced_as(priced_as, table)
    return table
