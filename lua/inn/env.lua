-- inn's namespace table (imagine-nn's inn.env): the classes register in it as inn.<Name>.
inn = rawget(_G, 'inn') or {}
return inn
