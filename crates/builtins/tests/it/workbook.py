import datetime, openpyxl
from openpyxl.styles import Font
wb = openpyxl.Workbook()
ws = wb.active
ws.title = "summary"
ws["A1"] = "Quarterly targets 2024"
ws.merge_cells("A1:G1")
ws.append([])
ws.append(["region", "quarter", "start", "target", "double", "met", "ratio"])
rows = [
    ("West", "Q3", datetime.date(2024, 7, 1), 139000, True, 1),
    (None, "Q4", datetime.date(2024, 10, 1), 150000, False, 0),
    ("East", "Q3", datetime.datetime(2024, 7, 1, 9, 30), 120500.5, True, 2),
]
for i, (region, q, start, target, met, div) in enumerate(rows, start=4):
    ws.cell(i, 1, region)
    ws.cell(i, 2, q)
    ws.cell(i, 3, start)
    ws.cell(i, 4, target)
    ws.cell(i, 5, f"=D{i}*2")
    ws.cell(i, 6, met)
    ws.cell(i, 7, f"=D{i}/{div}")
ws.merge_cells("A4:A5")
ws.append([])
ws.append(["North", "Q1", datetime.date(2024, 1, 2), 90000, "=D8*2", False, "=D8/4"])
sales = wb.create_sheet("sales")
sales.append(["date", "region", "amount"])
for d in range(1, 31):
    sales.append([datetime.date(2024, 6, d), ["West", "East"][d % 2], d * 10.5])
notes = wb.create_sheet("notes")
notes["A1"] = "Read me"
wb.save("book.xlsx")
