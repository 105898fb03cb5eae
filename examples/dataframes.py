"""The DataFrame flow: plan and apply a spec over a pandas DataFrame, offline (mock provider).

Run from the repository root:  python examples/dataframes.py
"""

import pandas as pd

import batchor

df = pd.read_csv("examples/data/reviews.csv", dtype=str).head(25)
df.index = [f"row-{i}" for i in range(len(df))]  # your index is kept

plan = batchor.plan("specs/reviews.yaml", df, mock=True)
print(plan)

result = batchor.apply(plan)
print(result)
print(result.data[["product", "classify.sentiment", "classify.rating_guess", "_status"]].head())
print("failed rows:", result.errors().num_rows)
